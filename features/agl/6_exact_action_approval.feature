# agl-behavioral-contracts.txt §6 Exact-action approval: 6.1 the proposed
# interface (propose, the trusted resolver, what a permit binds, defaults),
# 6.2 canonicalization and authenticity, 6.3 consumption and rejection.
Feature: Exact-action approval permits
  A proposal is an immutable snapshot with a canonical digest. Only the
  trusted resolver turns it into a permit, the permit binds exactly that
  snapshot, and it is claimed at most once.

  Background:
    Given an AGL host with a fake email destination the suite counts
    And a principal whose agent may use the email and transfer operations under a grant from the authorization service

  @req:agl.approval.propose-no-effect @profile:agl-core @fixture:agl-core
  Scenario: Proposing and approving write nothing to the destination
    Given the principal drafts an email to "bob@example.com"
    When the agent proposes sending the draft
    And approval of the proposal is requested
    And the resolver grants the approval
    Then the destination received no message
    And the operation is "Pending"

  @req:agl.approval.only-resolver-mints @profile:agl-core @fixture:agl-core
  Scenario Outline: A granted decision from anyone but the resolver mints no permit
    Given the principal drafts an email to "bob@example.com"
    And the agent proposes sending the draft
    And approval of the proposal is requested
    When <who> submits a granted decision for the request
    Then the response is refused with status <status> and code "<code>"
    And the approval request is "pending"
    And the draft is "Proposed"

    Examples:
      | who                                             | status | code                     |
      | the agent, with no credentials,                 | 401    | unauthenticated_decision |
      | the agent, presenting its grant token,          | 403    | unauthenticated_decision |
      | the operator                                    | 403    | unauthenticated_decision |
      | the resolver, for an approver without the role, | 403    | approver_role_mismatch   |
      | the resolver, quoting another digest,           | 409    | proposal_mismatch        |

  @req:agl.approval.only-resolver-mints @profile:agl-core @fixture:agl-core
  Scenario: A dispatch carrying a granted decision the agent wrote itself is refused
    Given the principal drafts an email to "bob@example.com"
    And the agent proposes sending the draft
    And approval of the proposal is requested
    When the agent dispatches the send of the draft with a granted decision it wrote itself
    Then the action is refused with status 403, code "unauthenticated_decision" and category "authorization_denied"
    And the destination received no message

  @req:agl.approval.only-resolver-mints @profile:agl-core @fixture:agl-core
  Scenario: A made-up permit token does not authorize an approved action
    Given the principal has an approved send of a draft to "bob@example.com"
    When the agent dispatches the approved send with a permit token it made up
    Then the action is refused with status 403, code "unbound_approval" and category "authorization_denied"
    And the destination received no message

  @req:agl.approval.rejection-stops-dispatch @profile:agl-core @fixture:agl-core
  Scenario: A denied approval gives no permit and nothing dispatches
    Given the principal drafts an email to "bob@example.com"
    And the agent proposes sending the draft
    And approval of the proposal is requested
    When the resolver denies the approval
    Then the decision carries no permit
    When the agent dispatches the send of the draft without a permit
    Then the action is refused with status 409, code "invalid_protocol_state" and category "invalid_protocol_state"
    And the destination received no message

  @req:agl.approval.binds-exact-arguments @profile:agl-core @fixture:agl-core
  Scenario Outline: A permit does not stretch to a changed argument
    Given the principal has an approved transfer of 1500 to "DE89370400440532013000"
    When the agent dispatches the approved transfer with the <member> changed to "<value>"
    Then the action is refused with status 403, code "proposal_mismatch" and category "proposal_mismatch"
    And the refusal names "arguments/<member>" as the member that differs
    And the ledger received no transfer

    Examples:
      | member    | value                  |
      | amount    | 15000                  |
      | recipient | GB33BUKB20201555555555 |
      | currency  | USD                    |

  @req:agl.approval.binds-exact-arguments @profile:agl-core @fixture:agl-core
  Scenario: The unchanged transfer dispatches once under its permit
    Given the principal has an approved transfer of 1500 to "DE89370400440532013000"
    When the agent dispatches the approved transfer unchanged
    Then the dispatch completed
    And the ledger received exactly one transfer of 1500 to "DE89370400440532013000"

  @req:agl.approval.binds-exact-arguments @profile:agl-core @fixture:agl-core
  Scenario: A permit issued at one destination does not dispatch to another
    Given a second AGL host shares the first host's operation store but sends email to another destination
    And the principal has an approved send of a draft to "bob@example.com"
    When the agent dispatches the approved send at the second host
    Then the action is refused with status 403, code "proposal_mismatch" and category "proposal_mismatch"
    And the refusal names "deployment" as the member that differs
    And neither destination received a message

  @req:agl.approval.binds-parties @profile:agl-core @fixture:agl-core
  Scenario Outline: A permit does not serve another principal or another execution
    Given the principal has delegated its grant to a helper for the transfer operation only, expiring sooner
    And the principal has an approved transfer of 200 to "DE89370400440532013000"
    When the approved transfer is dispatched with its permit <by whom>
    Then the action is refused with status 403, code "proposal_mismatch" and category "proposal_mismatch"
    And the refusal names "<member>" as the member that differs
    And the ledger received no transfer
    And the permit is not consumed
    When the agent dispatches the approved transfer unchanged
    Then the dispatch completed

    Examples:
      | by whom                                         | member       |
      | by the helper's agent under the delegated grant | principal    |
      | in another execution of the principal           | execution_id |

  @req:agl.approval.policy-change-voids @profile:agl-core @fixture:agl-restricted
  Scenario Outline: A permit issued before a policy change does not dispatch under the new policy
    Given the host's deployment policy allows recipients only in "example.com"
    And a second AGL host shares the first host's operation store but its deployment policy allows recipients only in "<domains>"
    And the principal has an approved send of a draft to "bob@example.com"
    When the agent dispatches the approved send at the second host
    Then the action is refused with status 403, code "<code>" and category "<category>"
    And the destination received no message
    And the permit is not consumed
    When the agent dispatches the approved send
    Then the dispatch completed
    And the destination received exactly one message

    Examples:
      | domains                  | code                        | category             |
      | example.org              | deployment_restricted       | authorization_denied |
      | example.com, example.net | policy_fingerprint_mismatch | proposal_mismatch    |

  @req:agl.approval.defaults-materialized @profile:agl-core @fixture:agl-core
  Scenario: The approver is shown every default as an explicit value
    Given the principal drafts an email to "bob@example.com" without cc or priority
    When the agent proposes sending the draft
    And approval of the proposal is requested
    Then the snapshot the approver is shown has cc "[]" and priority "normal"
    When the agent proposes a transfer of 1500 to "DE89370400440532013000" without a currency
    And approval of the proposal is requested
    Then the snapshot the approver is shown has currency "EUR"

  @req:agl.approval.shown-snapshot-executed @profile:agl-core @fixture:agl-core
  Scenario: The destination receives exactly the snapshot the approver was shown
    Given the principal drafts an email to "bob@example.com" without cc or priority
    When the agent proposes sending the draft
    And approval of the proposal is requested
    And the resolver grants the approval
    And the agent dispatches the approved send
    Then the dispatch completed
    And the message the destination received carries exactly the draft the approver was shown
    And the permit binds the digest of the snapshot the approver was shown

  @req:agl.canon.versioned-encoding @profile:agl-core @fixture:agl-core
  Scenario: The snapshot digest is SHA-256 over the versioned canonical encoding
    When the agent proposes a transfer of 1500 to "DE89370400440532013000"
    Then the proposal names canonical encoding version "agl-canon/1"
    And the proposal's canonical encoding is the suite's own agl-canon/1 encoding of its snapshot
    And the proposal's digest is the SHA-256 of its canonical encoding

  @req:agl.canon.versioned-encoding @profile:agl-core @fixture:agl-core
  Scenario: Equal actions written differently get one digest, different ones do not
    When the agent proposes a transfer of 1500 to "DE89370400440532013000"
    And the agent proposes the same transfer again with its members reordered and the amount written "1.5e3"
    Then the two proposals have the same digest
    When the agent proposes a transfer of 1501 to "DE89370400440532013000"
    Then its digest differs from the first proposal's

  @req:agl.approval.expiry-stops-dispatch @profile:agl-core @fixture:agl-core @exclusive
  Scenario: An expired permit does not dispatch
    Given the suite moves the host's clock instead of waiting, where the host offers the clock seam
    And the principal drafts an email to "bob@example.com"
    And the agent proposes sending the draft
    And approval of the proposal is requested for 1 second
    And the resolver grants the approval
    When the permit has expired
    And the agent dispatches the approved send
    Then the action is refused with status 403, code "permit_expired" and category "approval_expired_or_revoked"
    And the destination received no message
    And the permit is not consumed

  @req:agl.approval.revocation-stops-dispatch @profile:agl-core @fixture:agl-core
  Scenario: A revoked permit does not dispatch
    Given the principal has an approved send of a draft to "bob@example.com"
    When the resolver revokes the permit
    And the agent dispatches the approved send
    Then the action is refused with status 403, code "permit_revoked" and category "approval_expired_or_revoked"
    And the destination received no message

  @req:agl.approval.revocation-stops-dispatch @profile:agl-core @fixture:agl-core
  Scenario: Revoking after dispatch undoes nothing and the outcome stays readable
    Given the principal has an approved send of a draft to "bob@example.com"
    When the agent dispatches the approved send
    Then the dispatch completed
    When the resolver revokes the permit
    Then the operation is "Completed"
    And the destination received exactly one message

  @req:agl.dispatch.permit.single-claim @profile:agl-core @fixture:agl-core
  Scenario: A permit replayed after its dispatch is refused as claimed
    Given the principal has an approved send of a draft to "bob@example.com"
    When the agent dispatches the approved send
    Then the dispatch completed
    When the agent dispatches the approved send
    Then the action is refused with status 409, code "permit_consumed" and category "permit_claimed"
    And the destination received exactly one message
    And the permit is consumed by the first operation

  @req:agl.dispatch.permit.single-claim @profile:agl-core @fixture:agl-core
  Scenario: Of many concurrent dispatches of one permit exactly one proceeds
    Given the AGL test seams are enabled
    And the principal has an approved send of a draft to "bob@example.com"
    And the host holds the next 8 claimers until all have arrived
    When the agent dispatches the approved send 8 times at once
    Then exactly one dispatch completed and every other was refused as a claimed permit
    And the destination received exactly one message

  @req:agl.dispatch.permit.single-claim @profile:agl-core @fixture:agl-core
  Scenario: Copying the permit id does not copy its authority
    Given the principal has an approved send of a draft to "bob@example.com"
    When the agent dispatches the approved send presenting the permit id as its token
    Then the action is refused with status 403, code "unbound_approval" and category "authorization_denied"
    And the permit is not consumed
