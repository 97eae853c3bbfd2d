# agl-behavioral-contracts.txt §12 Diagnostics and audit: a static
# diagnostic about a protocol state names the state required and the state
# the resource is in, with a remediation (docs/agl-binding.md §11.3). Rows
# name fixtures of scenarios/agl-checker.
@fixture:agl-core
Feature: Diagnostics name the required and the actual state
  A developer told that a call is in the wrong state learns which state
  the call needs, which state the resource is in there, and what to do.

  Background:
    Given an AGL host with a workflow checker

  @req:agl.checker.diagnostics-states @profile:agl-checker
  Scenario Outline: A diagnostic about a protocol state names the state required, the state found, and a remediation
    When the checker checks the workflow "<workflow>"
    Then the checker rejects it with "<code>" at <span>
    And that diagnostic requires state "<required>", finds state "<actual>" and offers a remediation

    Examples:
      | workflow                      | code      | span        | required   | actual   |
      | operation/input-state         | AGL-E0201 | 8:28-8:29   | Unknown    | Draft    |
      | boolean/if-approved-then-send | AGL-E0201 | 12:31-12:32 | Authorized | Proposed |
      | loop/proposes-outer-draft     | AGL-E0311 | 10:1-12:2   | Draft      | Proposed |
