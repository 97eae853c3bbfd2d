# agl-behavioral-contracts.txt §4.3 Authority grants (delegation) and §13
# Stage 3 (attenuated delegation on the same dispatcher). The bounds a grant
# has on the wire: operations, resources and the validity interval (spec
# profile agl-delegation); a use count, max_uses, is parley's binding
# (docs/agl-binding.md §14), checked only in agl-parley-binding.
@fixture:agl-delegation
Feature: Bounded delegation
  A delegated grant is its delegator's authority attenuated: it covers no
  operation, resource, time or use its delegator does not hold, a
  redelegation narrows again, every use under it is spent through the one
  dispatcher, and a delegate stops when its delegator's count is spent.
  Every refusal says which bound it met.

  Background:
    Given an AGL host with a fake email destination the suite counts
    And a principal whose agent may use the email and transfer operations under a grant from the authorization service

  @req:agl.delegation.attenuates @profile:agl-delegation
  Scenario Outline: A delegation asking for more than its delegator holds is refused, naming the bound
    When the principal delegates its grant to a helper <asking>
    Then the response is refused with status 403 and code "delegation_widens"
    And the refusal names the bound "<bound>"

    Examples:
      | asking                                          | bound      |
      | for an operation the principal lacks            | operations |
      | for a mailbox the principal lacks               | resources  |
      | for every account                               | resources  |
      | expiring after the principal's grant            | expires_at |
      | valid from an hour before the principal's grant | not_before |

  @req:agl.delegation.redelegation-narrows @profile:agl-delegation
  Scenario Outline: A redelegation asking for more than the delegate holds is refused, though its delegator holds it
    Given the principal has delegated its grant to a helper for the transfer operation only, expiring sooner
    When the helper redelegates its grant to an assistant <asking>
    Then the response is refused with status 403 and code "delegation_widens"
    And the refusal names the bound "<bound>"

    Examples:
      | asking                            | bound      |
      | for the email operation too       | operations |
      | for the principal's mailbox       | resources  |
      | expiring after the helper's grant | expires_at |

  @req:agl.delegation.redelegation-narrows @profile:agl-delegation
  Scenario: A narrower redelegation is issued under the delegate's grant
    Given the principal has delegated its grant to a helper for the transfer operation only, expiring sooner
    When the helper redelegates its grant to an assistant for the transfer operation only
    Then the response status is 201
    And the assistant's grant names the helper's grant as its parent and expires no later than it

  @req:agl.delegation.same-dispatcher @profile:agl-delegation
  Scenario: A dispatch under delegated authority is claimed, deduplicated and audited like any other
    Given the principal has delegated its grant to a helper for the transfer operation only, expiring sooner
    And the helper's agent proposes a transfer of 200 to "DE89370400440532013000" under the delegated grant
    And approval of the proposal is requested
    And the resolver grants the approval
    When the helper's agent dispatches the approved transfer under the delegated grant
    Then the response status is 200
    And the ledger received exactly one message naming the operation, the helper's grant and the permit
    When the helper's agent dispatches the approved transfer under the delegated grant
    Then the action is refused with status 409, code "permit_consumed" and category "permit_claimed"
    And the ledger received exactly one transfer
    And the audit trail of the operation records one claim, by the helper under the delegated grant

  @req:agl.delegation.budget-bounded-by-delegator @profile:agl-parley-binding
  Scenario Outline: A delegation asking for more uses than its delegator has left is refused, naming the bound
    Given the principal's grant allows 3 uses
    When the principal delegates its bounded grant to a helper with <n> uses
    Then the response is refused with status 403 and code "delegation_widens"
    And the refusal names the bound "max_uses"

    Examples:
      | n |
      | 4 |

  @req:agl.delegation.budget-bounded-by-delegator @profile:agl-parley-binding
  Scenario: A delegation within its delegator's uses is issued with its own use count
    Given the principal's grant allows 3 uses
    When the principal delegates its bounded grant to a helper with 2 uses
    Then the response status is 201
    And the delegated grant names the principal's grant as its parent, allows 2 uses and expires no later than it

  @req:agl.delegation.budget-bounded-by-delegator @profile:agl-parley-binding
  Scenario: A delegate stops at its own use count while its delegator has uses left
    Given the principal's grant allows 3 uses
    And the principal has delegated its bounded grant to a helper with 1 use
    When the helper makes an approved transfer of 200 to "DE89370400440532013000" under the delegated grant
    Then the response status is 200
    When the helper makes an approved transfer of 300 to "DE89370400440532013000" under the delegated grant
    Then the action is refused with status 403, code "grant_uses_exhausted" and category "authorization_denied"
    And the refusal names the bound "max_uses" of the helper's grant
    And the ledger received exactly one transfer

  @req:agl.delegation.budget-bounded-by-delegator @profile:agl-parley-binding
  Scenario: A delegator that has spent its uses stops its delegate
    Given the principal's grant allows 1 use
    And the principal has delegated its grant to a helper for the transfer operation only, expiring sooner
    When the principal makes an approved send to "bob@example.com" under its grant
    Then the response status is 200
    When the helper makes an approved transfer of 200 to "DE89370400440532013000" under the delegated grant
    Then the action is refused with status 403, code "grant_uses_exhausted" and category "authorization_denied"
    And the refusal names the bound "max_uses" of the principal's grant
    And the ledger received no transfer

  @req:agl.delegation.budget-bounded-by-delegator @profile:agl-parley-binding
  Scenario: A delegate's uses are spent from its delegator's count
    Given the principal's grant allows 1 use
    And the principal has delegated its grant to a helper for the transfer operation only, expiring sooner
    When the helper makes an approved transfer of 200 to "DE89370400440532013000" under the delegated grant
    Then the response status is 200
    When the principal makes an approved send to "bob@example.com" under its grant
    Then the action is refused with status 403, code "grant_uses_exhausted" and category "authorization_denied"
    And the refusal names the bound "max_uses" of the principal's grant
    And the destination received no message

  # The refusal is the cascade itself (a binding choice: 4.3 does not say
  # revocation cascades), so it witnesses that id, not the use-count bound.
  @req:agl.authority.revocation-cascades @profile:agl-parley-binding
  Scenario: A revoked delegator stops its delegate, the refusal naming the revoked grant
    Given the principal has delegated its grant to a helper for the transfer operation only, expiring sooner
    And the helper has an approved transfer of 200 to "DE89370400440532013000" under the delegated grant
    When the authorization service revokes the principal's grant
    And the helper dispatches its approved transfer
    Then the action is refused with status 403, code "grant_revoked" and category "authorization_denied"
    And the refusal names the bound "revoked" of the principal's grant
    And the ledger received no transfer
