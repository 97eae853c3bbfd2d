# agl-behavioral-contracts.txt §9 Parallel execution and resources (and the
# unsupported-protected-race diagnostic of §12), as the workflow checker of
# agl-binding/1 judges them (docs/agl-binding.md §11). Rows name fixtures of
# scenarios/agl-checker.
@fixture:agl-core
Feature: Parallel scopes, parallel maps and races in the checker
  Parallel branches receive disjoint handles and one-shot permits; a permit
  cannot be captured by two branches or duplicated by a parallel map; and a
  protected external write never runs inside a race, whose losing branch
  cannot take back what it did.

  Background:
    Given an AGL host with a workflow checker

  @req:agl.checker.parallel-disjoint @profile:agl-checker
  Scenario Outline: Branches that hold their own resources and share only values check
    When the checker checks the workflow "<workflow>"
    Then the checker certifies it with effect bound "<effects>" and resources after "<after>"

    Examples:
      | workflow                 | effects      | after                                              |
      | parallel/disjoint-drafts | -            | d1: email_draft Proposed, d2: email_draft Proposed |
      | parallel/shared-values   | network_read | d: email_draft Draft                               |
      | parallel/map-values      | network_read | d: email_draft Draft                               |

  @req:agl.checker.parallel-disjoint @profile:agl-checker
  Scenario Outline: A resource captured by two branches, or by every item of a parallel map, is rejected
    When the checker checks the workflow "<workflow>"
    Then the checker rejects it with "<code>" at <span>

    Examples:
      | workflow                          | code      | span        |
      | parallel/one-permit-two-branches  | AGL-E0601 | 15:41-15:42 |
      | parallel/one-handle-two-branches  | AGL-E0601 | 13:30-13:31 |
      | parallel/shared-borrow            | AGL-E0601 | 14:33-14:34 |
      | parallel/map-permit               | AGL-E0603 | 11:39-11:40 |
      | parallel/map-handle               | AGL-E0603 | 10:31-10:32 |

  @req:agl.checker.race-protected-write @profile:agl-checker
  Scenario: A race of reads and a model call checks
    When the checker checks the workflow "race/read-race"
    Then the checker certifies it with effect bound "network_read" and resources after "d: email_draft Draft"

  @req:agl.checker.race-protected-write @profile:agl-checker
  Scenario Outline: A protected write inside a race is rejected, even through an agent's tool
    When the checker checks the workflow "<workflow>"
    Then the checker rejects it with "AGL-E0610" at <span>

    Examples:
      | workflow              | span       |
      | race/send-in-race     | 12:5-12:50 |
      | race/agent-may-write  | 10:5-10:32 |
