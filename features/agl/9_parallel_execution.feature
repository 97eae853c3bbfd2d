# agl-behavioral-contracts.txt §9 Parallel execution and resources: no
# protected external write inside a race; compare-and-swap on the resource
# revision.
Feature: Parallel execution and resources
  A cancelled branch of a race cannot retract an effect it already had, so
  a protected write inside a race is refused. Transitions of a resource
  revision are compare-and-swap, so concurrent ones cannot both happen.

  Background:
    Given an AGL host with a fake email destination the suite counts
    And a principal whose agent may use the email and transfer operations under a grant from the authorization service

  @req:agl.parallel.race-write-refused @profile:agl-core @fixture:agl-core
  Scenario: A protected write inside a race is refused before anything is claimed
    Given the principal has an approved send of a draft to "bob@example.com"
    When the agent dispatches the approved send from a branch of a race
    Then the action is refused with status 403, code "unsupported_protected_race" and category "authorization_denied"
    And the destination received no message
    And the permit is not consumed
    And the draft is "Authorized"
    When the agent dispatches the approved send
    Then the dispatch completed

  @req:agl.parallel.race-write-refused @profile:agl-core @fixture:agl-core
  Scenario: A protected financial write inside a race is refused too
    Given the principal has an approved transfer of 1500 to "DE89370400440532013000"
    When the agent dispatches the approved transfer from a branch of a race
    Then the action is refused with status 403, code "unsupported_protected_race" and category "authorization_denied"
    And the ledger received no transfer

  @req:agl.parallel.revision-cas @profile:agl-core @fixture:agl-core
  Scenario: Of concurrent proposals of one revision exactly one moves the draft
    Given the AGL test seams are enabled
    And the principal drafts an email to "bob@example.com"
    And the host holds the next 8 proposers until all have arrived
    When the agent proposes sending the draft 8 times at once
    Then exactly one proposal was accepted and every other was refused as a stale revision or invalid state
    And the draft is "Proposed" at revision 1

  @req:agl.parallel.revision-cas @profile:agl-core @fixture:agl-core
  Scenario: A dispatch and an edit racing for one revision never both take effect
    Given the AGL test seams are enabled
    And the principal has an approved send of a draft to "bob@example.com"
    And the host holds the next claimer and editor until both have arrived
    When the agent dispatches the approved send while the principal edits the draft
    Then exactly one of the dispatch and the edit took effect

  @req:agl.parallel.nested-budgets @profile:agl-core @fixture:agl-core
  Scenario Outline: A child scope cannot be given more than its parent
    Given the operator gives the execution a budget of <parent> tool calls
    When the workflow opens a child scope of the execution's budget with <child> tool calls
    Then the response is refused with status 403 and code "budget_exceeds_parent"
    When the workflow opens a child scope of the execution's budget with <parent> tool calls
    Then the response status is 201
    And the response body satisfies the schema "agl/scope.json"

    Examples:
      | parent | child |
      | 2      | 3     |
      | 1      | 5     |

  @req:agl.parallel.nested-budgets @profile:agl-core @fixture:agl-core
  Scenario Outline: Sibling scopes together stay within their parent's budget, and no call escapes it
    Given the operator gives the execution a budget of 2 tool calls
    And the workflow opens two child scopes, "left" and "right", each with 2 tool calls
    When the agent dispatches an approved send in scope "<first>"
    Then the dispatch completed
    When the agent dispatches an approved send in scope "<second>"
    Then the dispatch completed
    When the agent dispatches an approved send in scope "<third>"
    Then the action is refused with status 403, code "budget_exhausted" and category "capacity"
    And the refusal names the execution's budget as the one spent
    And the destination received 2 messages

    Examples:
      | first | second | third |
      | left  | left   | right |
      | left  | right  | left  |
      | left  | right  | none  |

  @req:agl.parallel.map-single-claim @profile:agl-core @fixture:agl-core
  Scenario Outline: A parallel map whose branches share a permit is refused before anything runs
    Given the principal has 2 approved sends of drafts to "bob@example.com"
    When the workflow maps branches over the approved sends, presenting the permits of sends "<permits>"
    Then the response is refused with status 403 and code "permit_shared_across_branches"
    And the destination received no message
    And no approved send's permit is consumed

    Examples:
      | permits       |
      | 1, 1          |
      | 2, 2, 2, 2, 2 |
      | 1, 2, 1       |

  @req:agl.parallel.map-single-claim @profile:agl-core @fixture:agl-core
  Scenario: A parallel map whose branches each hold their own permit runs every branch once
    Given the principal has 3 approved sends of drafts to "bob@example.com"
    When the workflow maps branches over the approved sends, presenting the permits of sends "1, 2, 3"
    Then every branch completed under its own send's operation
    And the destination received 3 messages

  @req:agl.parallel.race-no-half-claim @profile:agl-core @fixture:agl-core
  Scenario Outline: A race of reads leaves one winner and no half-claimed loser
    Given the AGL test seams are enabled
    And the host gives a handler 8000 ms to answer
    And the operator gives the execution a budget of 5 tool calls
    And the email delivery-status read is registered and in the agent's tool set
    And the destination will hang on the next <hung> lookups
    When the workflow races <branches> reads of the delivery status
    Then the race has one winner, which completed, and every other branch ended FailedNoEffect, cancelled
    And no operation of the execution is left Claimed
    And every lookup the destination held was abandoned by the host
    And the host holds no admission slot and no budget reservation
    And the execution's budget shows <branches> tool calls used

    Examples:
      | branches | hung |
      | 2        | 1    |
      | 3        | 2    |
