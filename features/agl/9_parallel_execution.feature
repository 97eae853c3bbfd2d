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

  @req:agl.parallel.race-write-refused @profile:agl-core
  Scenario: A protected write inside a race is refused before anything is claimed
    Given the principal has an approved send of a draft to "bob@example.com"
    When the agent dispatches the approved send from a branch of a race
    Then the action is refused with status 403, code "unsupported_protected_race" and category "authorization_denied"
    And the destination received no message
    And the permit is not consumed
    And the draft is "Authorized"
    When the agent dispatches the approved send
    Then the dispatch completed

  @req:agl.parallel.race-write-refused @profile:agl-core
  Scenario: A protected financial write inside a race is refused too
    Given the principal has an approved transfer of 1500 to "DE89370400440532013000"
    When the agent dispatches the approved transfer from a branch of a race
    Then the action is refused with status 403, code "unsupported_protected_race" and category "authorization_denied"
    And the ledger received no transfer

  @req:agl.parallel.revision-cas @profile:agl-core
  Scenario: Of concurrent proposals of one revision exactly one moves the draft
    Given the principal drafts an email to "bob@example.com"
    When the agent proposes sending the draft 8 times at once
    Then exactly one proposal was accepted and every other was refused as a stale revision or invalid state
    And the draft is "Proposed" at revision 1

  @req:agl.parallel.revision-cas @profile:agl-core
  Scenario: A dispatch and an edit racing for one revision never both take effect
    Given the principal has an approved send of a draft to "bob@example.com"
    When the agent dispatches the approved send while the principal edits the draft
    Then exactly one of the dispatch and the edit took effect
