# agl-behavioral-contracts.txt §12 Diagnostics and audit: static diagnostics
# with stable codes and source spans, as the workflow checker of
# agl-binding/1 reports them (docs/agl-binding.md §11). Rows name fixtures of
# scenarios/agl-checker.
@fixture:agl-core
Feature: The checker's diagnostics
  A workflow that does not check gets diagnostics a developer can act on: a
  stable code, a message, the span of the fault, the spans that explain it,
  the required and actual state where there are any, and a remediation. The
  same workflow always gets the same diagnostics.

  Background:
    Given an AGL host with a workflow checker

  @req:agl.checker.diagnostics @profile:agl-checker
  Scenario Outline: The same workflow gets the same diagnostics in the same order, however its members are ordered
    When the checker checks the workflow "<workflow>"
    And the checker checks the workflow "<workflow>" again
    And the checker checks the workflow "<workflow>" again, its members in another order
    Then every answer carries the same diagnostics in the same order

    Examples:
      | workflow                         |
      | affine/double-dispatch           |
      | join/consumed-on-one-branch      |
      | boolean/if-approved-then-send    |
      | retry/send-in-retry              |
      | parallel/one-permit-two-branches |

  @req:agl.checker.diagnostics @profile:agl-checker
  Scenario Outline: A diagnostic points at the fault and at the places that explain it
    When the checker checks the workflow "<workflow>"
    Then the checker rejects it with "<code>" at <span>
    And that diagnostic relates <related>

    Examples:
      | workflow                         | code      | span        | related     |
      | affine/use-after-move            | AGL-E0101 | 10:37-10:38 | 9:9-9:10    |
      | join/consumed-on-one-branch      | AGL-E0210 | 14:29-14:30 | 12:31-12:32 |
      | stale/old-handle-after-edit      | AGL-E0230 | 9:32-9:33   | 8:1-8:73    |
      | parallel/one-handle-two-branches | AGL-E0601 | 13:30-13:31 | 10:36-10:37 |
      | loop/consumes-outer-permit       | AGL-E0310 | 12:39-12:40 | 11:1-13:2   |
