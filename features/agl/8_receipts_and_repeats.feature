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

  # The principal's host approves and crashes while the send is claimed;
  # the fixture's host, on the same store, recovers the claim under its own
  # deployment. Whether recovery resends at all is the host's choice: what
  # holds either way is that under changed conditions nothing is sent.
  @req:agl.recovery.approval-conditions-changed @profile:agl-operation-store @fixture:agl-store
  Scenario Outline: Recovery under another deployment policy or destination sends nothing and leaves the send Unknown
    Given an AGL host whose fake email destination deduplicates by idempotency key
    And the AGL test seams are enabled
    And the hosts presume a silent host crashed after 1000 ms
    And a second AGL host shares the first host's operation store
    And the principal works at a host of its own on that store <which>
    And the email contract is registered as deduplicated by destination key with up to 3 attempts
    And the principal has an approved send of a draft to "bob@example.com"
    And the principal's host will crash at the external call, before sending
    When the agent dispatches the approved send
    Then the first host answered nothing
    And the second host soon reports the operation "Unknown" and awaiting reconciliation
    And no destination received a message
    When the operator reconciles the operation at the second host by asking the destination
    Then the operation is "ReconciledNoEffect"
    And the second host reports the draft "FailedNoEffect"
    And no destination received a message

    Examples:
      | which                                                                           |
      | whose deployment policy allows recipients only in "example.com, example.net"    |
      | that sends email to another destination                                         |

  # Section 9 has admission reserve retries with the tool calls before work
  # starts; section 8 permits the retries, never requires them. That the
  # retries of one logical operation are the one tool call it reserved is
  # parley's reading.
  @req:agl.retry.reserved-at-admission @profile:agl-parley-binding @fixture:agl-core
  Scenario Outline: parley's binding: an operation's retries were reserved when it was admitted, and spend no further budget
    Given an AGL host whose fake email destination deduplicates by idempotency key
    And the email contract is registered as deduplicated by destination key with up to 3 attempts
    And the operator gives the execution a budget of 1 tool call
    And the principal has an approved send of a draft to "bob@example.com"
    And the destination will fail after taking effect on the next <failures> messages
    When the agent dispatches the approved send
    Then the operation is "Completed"
    And the operation made <attempts> attempts
    And the destination was sent the message <attempts> times, every time with the operation id as idempotency key
    And the destination received exactly one message
    And the execution's budget shows 1 tool call used

    Examples:
      | failures | attempts |
      | 1        | 2        |
      | 2        | 3        |

  # Section 6.3: before a further attempt the MVP stops, and asks for a
  # renewed approval, when the permit has expired. A host that never
  # retries meets it.
  @req:agl.retry.expired-permit-stops-retry @profile:agl-operation-store @fixture:agl-core @exclusive
  Scenario: A permit that expires between attempts stops the retries, and the send waits for reconciliation
    Given an AGL host whose fake email destination deduplicates by idempotency key
    And the AGL test seams are enabled
    And the email contract is registered as deduplicated by destination key with up to 3 attempts, 1500 ms apart
    And the principal's grant lasts 3 days
    And the principal has an approved send of a draft to "bob@example.com" whose permit expires in 600 seconds
    And the destination will fail after taking effect on the next message
    When the agent starts dispatching the approved send
    And the first attempt has reached the destination
    And the host's clock moves 2 hours ahead
    And the dispatch finishes
    Then the operation is "Unknown" and awaits reconciliation
    And the operation made 1 attempt
    And the destination was sent the message 1 time, every time with the operation id as idempotency key
    When the agent dispatches the approved send
    Then the action is refused with status 409, code "uncertain_completion" and category "uncertain_completion"
    And the destination was sent the message 1 time, every time with the operation id as idempotency key
