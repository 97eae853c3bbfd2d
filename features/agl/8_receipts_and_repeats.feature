# agl-behavioral-contracts.txt §8 Durability, retries, and uncertain
# outcomes: a receipt that is JSON but not the contract's declared output
# type, and a destination that deduplicates under a contract that forbids
# repeats.
Feature: Receipts the contract does not accept, and repeats it does not allow
  An outcome is validated against the contract before it is persisted: a
  receipt the destination answered after the request was sent, well-formed
  JSON or not, that does not match the declared output type cannot establish
  success, and cannot establish that nothing happened either. Whether a
  logical operation may repeat is the contract's idempotency contract: a
  destination that happens to deduplicate does not license a repeat the
  contract forbids.

  Background:
    Given a principal whose agent may use the email and transfer operations under a grant from the authorization service

  @req:agl.durability.receipt-violates-output-type @profile:agl-operation-store @fixture:agl-core
  Scenario Outline: A send whose receipt is JSON but not the contract's output type is Unknown, never no effect
    Given an AGL host with a fake email destination the suite counts
    And the email contract declares its output as a message id of at least 8 characters
    And the principal has an approved send of a draft to "bob@example.com"
    And the destination will take effect on the next message and answer 200 with the receipt <receipt>
    When the agent dispatches the approved send
    Then the response status is 200
    And the operation is "Unknown" and awaits reconciliation
    And the draft is "Unknown"
    And the destination received exactly one message
    When the agent dispatches the approved send
    Then the action is refused with status 409, code "uncertain_completion" and category "uncertain_completion"
    And the destination received exactly one message
    When the operator reconciles the operation by asking the destination
    Then the operation is "ReconciledCompleted"
    And the draft is "Sent"

    Examples:
      | receipt                                       |
      | {"message_id": 4711, "duplicate": false}      |
      | {"id": "msg_0123456789", "duplicate": false}  |
      | {"message_id": "m-1", "duplicate": false}     |
      | ["msg_0123456789"]                            |

  @req:agl.retry.idempotency-contract-honoured @profile:agl-operation-store @fixture:agl-core
  Scenario Outline: A deduplicating destination does not license a repeat the contract forbids
    Given an AGL host whose fake email destination deduplicates by idempotency key
    And the email contract is registered as not idempotent with up to 3 attempts
    And the principal has an approved send of a draft to "bob@example.com"
    And the destination will <fault>
    When the agent dispatches the approved send
    Then the operation is "Unknown" and awaits reconciliation
    And the operation made 1 attempt
    And the destination was sent the message 1 time, every time with the operation id as idempotency key
    When the agent dispatches the approved send
    Then the action is refused with status 409, code "uncertain_completion" and category "uncertain_completion"
    And the destination was sent the message 1 time, every time with the operation id as idempotency key
    And the destination received exactly one message

    Examples:
      | fault                                                          |
      | fail after taking effect on the next message                   |
      | answer unreadable JSON after taking effect on the next message |
