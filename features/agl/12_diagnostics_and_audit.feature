# agl-behavioral-contracts.txt §12 Diagnostics and audit: runtime denials by
# class, none retryable or dressed as a network error; audit records and
# what they must never contain.
@fixture:agl-core
Feature: Runtime denials and the audit trail
  A refusal says which class of denial it is, with a stable reason, and is
  never presented as a transient network error. The audit trail records an
  operation from proposal to reconciliation without any bearer secret.

  Background:
    Given an AGL host with a fake email destination the suite counts
    And the AGL test seams are enabled
    And a principal whose agent may use the email and transfer operations under a grant from the authorization service

  @req:agl.diag.denials-distinct-not-retryable @profile:agl-core
  Scenario Outline: Each class of runtime denial is distinct and not retryable
    Given the principal has an approved send of a draft to "bob@example.com"
    And <condition>
    When the agent dispatches the approved send
    Then the action is refused with status <status>, code "<code>" and category "<category>"
    And the refusal is not dressed as a network error and is not retryable

    Examples:
      | condition                                                      | status | code                   | category                    |
      | the arguments are malformed                                    | 422    | schema_error           | schema_error                |
      | the operator narrows the agent's tool set to "ledger.transfer" | 403    | tool_not_in_toolset    | authorization_denied        |
      | the permit was revoked                                         | 403    | permit_revoked         | approval_expired_or_revoked |
      | the send names the draft's edited revision                     | 409    | invalid_protocol_state | invalid_protocol_state      |
      | the draft was edited                                           | 409    | stale_revision         | stale_revision              |
      | the permit was already used                                    | 409    | permit_consumed        | permit_claimed              |
      | the host will fail to persist the next claim                   | 500    | persistence_failure    | persistence_failure         |
      | the permit was used for a send that ended Unknown              | 409    | uncertain_completion   | uncertain_completion        |

  @req:agl.diag.denials-distinct-not-retryable @profile:agl-core
  Scenario: A changed argument is a proposal mismatch, not retryable
    Given the principal has an approved transfer of 1500 to "DE89370400440532013000"
    When the agent dispatches the approved transfer with the amount changed to "1600"
    Then the action is refused with status 403, code "proposal_mismatch" and category "proposal_mismatch"
    And the refusal is not dressed as a network error and is not retryable

  @req:agl.audit.fields @profile:agl-core
  Scenario: The audit trail of an operation carries what the spec lists
    Given the principal has an approved send of a draft to "bob@example.com"
    And the destination will fail after taking effect on the next message
    When the agent dispatches the approved send
    And the operator reconciles the operation by asking the destination
    Then the audit trail of the operation, read by the operator, satisfies the schema "agl/audit-page.json"
    And it names the execution id, the operation id, the principal and the proposal digest in every record
    And its claim record names the contract fingerprint, the host's policy fingerprint, the draft revision, the approver and the decision time, the claim time and attempt 1
    And its outcome record names outcome "Unknown"
    And its reconciliation record names outcome "ReconciledCompleted" and the reconciliation method

  @req:agl.audit.no-secrets @profile:agl-core
  Scenario: No bearer grant or permit secret reaches the audit trail
    Given the principal has an approved send of a draft to "bob@example.com"
    When the agent dispatches the approved send
    And the agent dispatches the approved send
    And the principal delegates its grant to a helper for the transfer operation only, expiring sooner
    And the resolver revokes the permit
    Then the whole audit trail contains neither the grant tokens, the permit token, the role keys, nor their SHA-256 digests
    And the audit trail names the permit and the grant by their public ids

  @req:agl.audit.snapshot-by-reference @profile:agl-core
  Scenario Outline: The audit trail keeps an action's payload by reference
    Given the principal has an approved <action>
    When the agent dispatches the approved <kind>
    Then the audit trail of the operation names its snapshot by the proposal digest, and that proposal holds the arguments
    And no audit record of the operation holds the recipient, amount, subject or body inline

    Examples:
      | action                                       | kind     |
      | transfer of 1500 to "DE89370400440532013000" | transfer |
      | send of a draft to "bob@example.com"         | send     |

  @req:agl.audit.snapshot-by-reference @profile:agl-core
  Scenario: An uncertain, reconciled operation keeps its payload by reference too
    Given the principal has an approved send of a draft to "bob@example.com"
    And the destination will fail after taking effect on the next message
    When the agent dispatches the approved send
    And the operator reconciles the operation by asking the destination
    Then the audit trail of the operation names its snapshot by the proposal digest, and that proposal holds the arguments
    And no audit record of the operation holds the recipient, amount, subject or body inline

  @req:agl.audit.keyed-field-digests @profile:agl-core
  Scenario Outline: No unkeyed digest of a recipient or an amount reaches the audit trail
    Given the principal has an approved <action>
    When the agent dispatches the approved <kind>
    Then the audit trail of the operation names its snapshot by the proposal digest, and that proposal holds the arguments
    And the audit trail holds no unkeyed digest of the recipient, amount, subject or body

    Examples:
      | action                                       | kind     |
      | transfer of 1500 to "DE89370400440532013000" | transfer |
      | transfer of 7 to "GB33BUKB20201555555555"    | transfer |
      | send of a draft to "bob@example.com"         | send     |
