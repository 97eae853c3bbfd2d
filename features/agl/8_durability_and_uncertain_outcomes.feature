# agl-behavioral-contracts.txt §8 Durability, retries, and uncertain
# outcomes: the operation lifecycle, crash while Claimed, invalid receipts,
# when a retry is allowed, and reconciliation.
Feature: Durable operations and uncertain outcomes
  Each logical operation is persisted with its own id. What the dispatcher
  cannot establish is Unknown, and an Unknown non-idempotent write waits for
  reconciliation or a human: it is never retried blindly.

  Background:
    Given a principal whose agent may use the email and transfer operations under a grant from the authorization service

  @req:agl.durability.operation-lifecycle @profile:agl-operation-store @fixture:agl-core
  Scenario: An operation is Pending when proposed, Claimed while it runs, then Completed
    Given an AGL host with a fake email destination the suite counts
    And the AGL test seams are enabled
    And the principal drafts an email to "bob@example.com"
    When the agent proposes sending the draft
    Then the operation is "Pending"
    When approval of the proposal is requested
    And the resolver grants the approval
    And the host will hold the next dispatch at the external call until the suite releases it
    And the agent starts dispatching the approved send
    Then while the call is paused the operation is "Claimed", the permit is consumed and the draft is "Dispatching"
    When the suite releases the dispatch held at the external call
    And the dispatch finishes
    Then the operation is "Completed"
    And the operation keeps the id the proposal gave it, and the permit names it

  @req:agl.durability.operation-lifecycle @profile:agl-operation-store @fixture:agl-core
  Scenario Outline: An operation ends FailedNoEffect or Unknown, and Unknown only reconciles
    Given an AGL host with a fake email destination the suite counts
    And the principal has an approved send of a draft to "bob@example.com"
    And the destination will <fault>
    When the agent dispatches the approved send
    Then the operation is "<state>"
    When the resolver records that a human established the operation had <resolution>
    Then <after>

    Examples:
      | fault                                        | state          | resolution | after                                                                          |
      | reject the next message before any effect    | FailedNoEffect | no effect  | the response is refused with status 409 and code "not_awaiting_reconciliation" |
      | fail after taking effect on the next message | Unknown        | an effect  | the operation is "ReconciledCompleted"                                         |
      | fail after taking effect on the next message | Unknown        | no effect  | the operation is "ReconciledNoEffect"                                          |

  @req:agl.durability.crash-while-claimed-unknown @profile:agl-operation-store @fixture:agl-store
  Scenario Outline: A host that crashes while the operation is Claimed leaves it Unknown, never retried
    Given an AGL host with a fake email destination the suite counts
    And the AGL test seams are enabled
    And the hosts presume a silent host crashed after 1000 ms
    And a second AGL host shares the first host's operation store
    And the principal has an approved send of a draft to "bob@example.com"
    And the first host will crash at the <boundary>
    When the agent dispatches the approved send
    Then the first host answered nothing
    And the destination received <effects>
    And the second host soon reports the operation "Unknown" and awaiting reconciliation
    And the second host reports the draft "Unknown"
    When the agent dispatches the approved send at the second host
    Then the action is refused with status 409, code "uncertain_completion" and category "uncertain_completion"
    And the destination received <effects>
    When the operator reconciles the operation at the second host by asking the destination
    Then the operation is "<reconciled>"
    And the second host reports the draft "<draft>"

    Examples:
      | boundary                      | effects             | reconciled          | draft          |
      | external call, before sending | no message          | ReconciledNoEffect  | FailedNoEffect |
      | completion, after the effect  | exactly one message | ReconciledCompleted | Sent           |

  @req:agl.durability.invalid-receipt-not-no-effect @profile:agl-operation-store @fixture:agl-core
  Scenario Outline: A send whose answer cannot be read is Unknown, not no effect
    Given an AGL host with a fake email destination the suite counts
    And the principal has an approved send of a draft to "bob@example.com"
    And the destination will <fault>
    When the agent dispatches the approved send
    Then the response status is 200
    And the operation is "Unknown" and awaits reconciliation
    And the draft is "Unknown"
    And the destination received exactly one message

    Examples:
      | fault                                                          |
      | answer unreadable JSON after taking effect on the next message |
      | fail after taking effect on the next message                   |

  @req:agl.durability.timeout-is-unknown @profile:agl-operation-store @fixture:agl-core
  Scenario Outline: A destination that hangs past the handler's deadline leaves the operation Unknown, never no effect
    Given an AGL host with a fake email destination the suite counts
    And the host gives a handler 600 ms to answer
    And the principal has an approved send of a draft to "bob@example.com"
    And the destination will <hang> on the next message
    When the agent dispatches the approved send
    Then the response status is 200
    And the operation is "Unknown" and awaits reconciliation
    And the draft is "Unknown"
    And the destination received <effects>
    When the operator reconciles the operation by asking the destination
    Then the operation is "<reconciled>"
    And the draft is "<draft>"

    Examples:
      | hang                       | effects             | reconciled          | draft          |
      | hang after taking effect   | exactly one message | ReconciledCompleted | Sent           |
      | hang without taking effect | no message          | ReconciledNoEffect  | FailedNoEffect |

  @req:agl.durability.no-blind-retry @profile:agl-operation-store @fixture:agl-core
  Scenario: An uncertain write to a destination that does not deduplicate is not retried
    Given an AGL host with a fake email destination the suite counts
    And the email contract is registered as deduplicated by destination key with up to 3 attempts
    And the principal has an approved send of a draft to "bob@example.com"
    And the destination will fail after taking effect on the next message
    When the agent dispatches the approved send
    Then the operation is "Unknown" and awaits reconciliation
    And the operation made 1 attempt
    And the destination received exactly one message
    When the agent dispatches the approved send
    Then the action is refused with status 409, code "uncertain_completion" and category "uncertain_completion"
    And the destination received exactly one message

  @req:agl.durability.idempotent-retry @profile:agl-parley-binding @fixture:agl-core
  Scenario: An uncertain write to a deduplicating destination is retried under the same key, with one effect
    Given an AGL host whose fake email destination deduplicates by idempotency key
    And the email contract is registered as deduplicated by destination key with up to 3 attempts
    And the principal has an approved send of a draft to "bob@example.com"
    And the destination will fail after taking effect on the next message
    When the agent dispatches the approved send
    Then the dispatch completed
    And the operation made 2 attempts
    And the destination received exactly one message, keyed by the operation id
    And the destination was sent the message 2 times, every time with the operation id as idempotency key

  # A host may retry here (section 8 permits it) or not: every attempt it
  # makes, one or several, must carry the operation's identity and context.
  @req:agl.dispatch.handler-context @profile:agl-core @fixture:agl-core
  Scenario: Every attempt of an operation the host may retry carries the same identity and context
    Given an AGL host whose fake email destination deduplicates by idempotency key
    And the email contract is registered as deduplicated by destination key with up to 3 attempts
    And the principal has an approved send of a draft to "bob@example.com"
    And the destination will fail after taking effect on the next message
    When the agent dispatches the approved send
    Then the response status is 200
    And every send the destination was asked for names the operation, the principal's grant and the permit, with attempts counting up from 1

  @req:agl.durability.distinct-operation-ids @profile:agl-operation-store @fixture:agl-core
  Scenario Outline: Several tool calls in one execution are distinct operations, identical arguments or not
    Given an AGL host with a fake email destination the suite counts
    When the agent makes <n> approved <calls> in the one execution, one after another
    Then the <destination> received <n> messages, each with the operation id its dispatch answered, no two alike
    And the host lists exactly those operations for the execution

    Examples:
      | n | calls                                        | destination |
      | 2 | transfers of 200 to "DE89370400440532013000" | ledger      |
      | 3 | transfers of 200 to "DE89370400440532013000" | ledger      |
      | 2 | sends of a draft to "bob@example.com"        | destination |

  # Section 8 permits a retry and never requires one: a host that never
  # retries passes these rows; the control row, which needs the retry to
  # happen, is parley's binding (agl.retry.retries-while-allowed).
  @req:agl.retry.authority-rechecked @profile:agl-operation-store @fixture:agl-core
  Scenario Outline: A retry checks authority and approval again: revoked between attempts, there is no second attempt
    Given an AGL host whose fake email destination deduplicates by idempotency key
    And the email contract is registered as deduplicated by destination key with up to 3 attempts, 1500 ms apart
    And the principal has an approved send of a draft to "bob@example.com"
    And the destination will fail after taking effect on the next message
    When the agent starts dispatching the approved send
    And the first attempt has reached the destination
    And <between the attempts>
    And the dispatch finishes
    Then the operation is "<state>"
    And the operation made <attempts> attempts
    And the destination was sent the message <attempts> times, every time with the operation id as idempotency key
    And the destination received exactly one message

    Examples:
      | between the attempts                                    | state     | attempts |
      | the resolver revokes the permit                         | Unknown   | 1        |
      | the authorization service revokes the principal's grant | Unknown   | 1        |

  @req:agl.retry.retries-while-allowed @profile:agl-parley-binding @fixture:agl-core
  Scenario: parley's binding: a retry whose grant and permit are still valid is made
    Given an AGL host whose fake email destination deduplicates by idempotency key
    And the email contract is registered as deduplicated by destination key with up to 3 attempts, 1500 ms apart
    And the principal has an approved send of a draft to "bob@example.com"
    And the destination will fail after taking effect on the next message
    When the agent starts dispatching the approved send
    And the first attempt has reached the destination
    And the operator reads the principal's grant
    And the dispatch finishes
    Then the operation is "Completed"
    And the operation made 2 attempts
    And the destination was sent the message 2 times, every time with the operation id as idempotency key
    And the destination received exactly one message

  # A host may stop before the budget (or never retry): the spec rows check
  # only that no attempt exceeds it; using the whole budget is parley's
  # binding (agl.retry.retries-while-allowed, below).
  @req:agl.retry.attempt-budget @profile:agl-operation-store @fixture:agl-core
  Scenario Outline: The attempt budget bounds the retries
    Given an AGL host whose fake email destination deduplicates by idempotency key
    And the email contract is registered as deduplicated by destination key with up to <max> attempts
    And the principal has an approved send of a draft to "bob@example.com"
    And the destination will fail after taking effect on the next <failures> messages
    When the agent dispatches the approved send
    Then the operation is "Unknown"
    And the operation made at most <max> attempts, and the destination was sent the message once per attempt, every time with the operation id as idempotency key
    And the destination received exactly one message

    Examples:
      | max | failures |
      | 2   | 3        |
      | 3   | 5        |

  @req:agl.retry.retries-while-allowed @profile:agl-parley-binding @fixture:agl-core
  Scenario Outline: parley's binding: retries go on while the attempt budget allows
    Given an AGL host whose fake email destination deduplicates by idempotency key
    And the email contract is registered as deduplicated by destination key with up to <max> attempts
    And the principal has an approved send of a draft to "bob@example.com"
    And the destination will fail after taking effect on the next <failures> messages
    When the agent dispatches the approved send
    Then the operation is "<state>"
    And the operation made <attempts> attempts
    And the destination was sent the message <attempts> times, every time with the operation id as idempotency key
    And the destination received exactly one message

    Examples:
      | max | failures | state     | attempts |
      | 2   | 3        | Unknown   | 2        |
      | 3   | 5        | Unknown   | 3        |
      | 3   | 2        | Completed | 3        |

  # Not retrying a failure the selector leaves out holds whether or not a
  # host retries at all; retrying one it names is parley's binding.
  @req:agl.retry.selector-honoured @profile:agl-operation-store @fixture:agl-core
  Scenario Outline: A failure the contract's retry selector does not name is not retried
    Given an AGL host whose fake email destination deduplicates by idempotency key
    And the email contract is registered as deduplicated by destination key with up to 3 attempts, retrying only on <selected>
    And the principal has an approved send of a draft to "bob@example.com"
    And the destination will <fault>
    When the agent dispatches the approved send
    Then the operation is "Unknown"
    And the operation made 1 attempt
    And the destination was sent the message 1 time, every time with the operation id as idempotency key

    Examples:
      | selected           | fault                                                          |
      | timeout            | fail after taking effect on the next message                   |
      | destination_error  | answer unreadable JSON after taking effect on the next message |

  @req:agl.retry.retries-while-allowed @profile:agl-parley-binding @fixture:agl-core
  Scenario Outline: parley's binding: a failure the retry selector names is retried
    Given an AGL host whose fake email destination deduplicates by idempotency key
    And the email contract is registered as deduplicated by destination key with up to 3 attempts, retrying only on <selected>
    And the principal has an approved send of a draft to "bob@example.com"
    And the destination will <fault>
    When the agent dispatches the approved send
    Then the operation is "<state>"
    And the operation made <attempts> attempts
    And the destination was sent the message <attempts> times, every time with the operation id as idempotency key

    Examples:
      | selected           | fault                                                          | state     | attempts |
      | unreadable_receipt | answer unreadable JSON after taking effect on the next message | Completed | 2        |
      | destination_error  | fail after taking effect on the next message                   | Completed | 2        |

  @req:agl.retention.consumed-permit-tombstone @profile:agl-operation-store @fixture:agl-core @exclusive
  Scenario Outline: A consumed permit presented after the retention sweep is still refused as claimed
    Given an AGL host with a fake email destination the suite counts
    And the AGL test seams are enabled
    And the host keeps records no longer needed for 1 hour
    And the principal's grant lasts 3 days
    And the principal holds a spare approved send whose permit expires in 600 seconds
    And the principal has an approved <action> whose permit expires in 86400 seconds
    When the agent dispatches the approved <kind>
    Then the dispatch completed
    When the host's clock moves <hours> hours ahead
    And the host's retention sweep runs
    Then the sweep kept or removed the spare permit, which dispatched nothing
    When the agent dispatches the approved <kind>
    Then the action is refused with status 409, code "permit_consumed" and category "permit_claimed"
    And the permit is consumed by the first operation
    And the <destination> received exactly one <message>

    Examples:
      | action                                      | kind     | hours | destination | message  |
      | send of a draft to "bob@example.com"        | send     | 2     | destination | message  |
      | transfer of 200 to "DE89370400440532013000" | transfer | 2     | ledger      | transfer |
      | transfer of 200 to "DE89370400440532013000" | transfer | 20    | ledger      | transfer |

  @req:agl.retention.pending-intent-kept @profile:agl-operation-store @fixture:agl-core @exclusive
  Scenario Outline: A pending intent survives the retention sweep while its permit can still dispatch it
    Given an AGL host with a fake email destination the suite counts
    And the AGL test seams are enabled
    And the host keeps records no longer needed for 1 hour
    And the principal's grant lasts 3 days
    And the principal holds a spare approved send whose permit expires in 600 seconds
    And the principal has an approved <action> whose permit expires in 86400 seconds
    When the host's clock moves <hours> hours ahead
    And the host's retention sweep runs
    Then the sweep kept or removed the spare permit, which dispatched nothing
    And the operation is "Pending"
    When the agent dispatches the approved <kind>
    Then the dispatch completed
    And the dispatch ran the operation the proposal named
    And the <destination> received exactly one <message>

    Examples:
      | action                                      | kind     | hours | destination | message  |
      | send of a draft to "bob@example.com"        | send     | 2     | destination | message  |
      | transfer of 200 to "DE89370400440532013000" | transfer | 20    | ledger      | transfer |

  @req:agl.recovery.completed-not-recontacted @profile:agl-operation-store @fixture:agl-core
  Scenario Outline: After a restart, a finished operation is served from the store, never run again
    Given an AGL host with a fake email destination the suite counts
    And the host keeps its state where the suite can restart it
    And the principal has an approved send of a draft to "bob@example.com"
    And the destination will <fault>
    When the agent dispatches the approved send
    Then the operation is "<state>"
    When the suite notes what the destination has been asked so far
    And the host <restart>
    Then the operation is "<state>"
    When the agent dispatches the approved send
    Then the action is refused with status 409, code "<code>" and category "<category>"
    And the destination has been asked nothing since

    Examples:
      | fault                                        | state          | restart                      | code                 | category             |
      | accept the next message                      | Completed      | crashes and is started again | permit_consumed      | permit_claimed       |
      | accept the next message                      | Completed      | is restarted                 | permit_consumed      | permit_claimed       |
      | reject the next message before any effect    | FailedNoEffect | crashes and is started again | permit_consumed      | permit_claimed       |
      | fail after taking effect on the next message | Unknown        | crashes and is started again | uncertain_completion | uncertain_completion |

  # Whether recovery resends at all is the host's choice (section 8 permits
  # a retry of a deduplicated write, never requires it): the spec form
  # checks what holds either way, that after the contract changed nothing is
  # sent and the operation stays Unknown; resuming, and the audit record of
  # a stop, are parley's binding (agl.recovery.resumes-deduplicated-send).
  @req:agl.recovery.fingerprints-checked @profile:agl-operation-store @fixture:agl-store
  Scenario: Recovery sends nothing under a contract registered anew since the approval
    Given an AGL host whose fake email destination deduplicates by idempotency key
    And the AGL test seams are enabled
    And the host keeps its state where the suite can restart it
    And the hosts presume a silent host crashed after 1000 ms
    And the email contract is registered as deduplicated by destination key with up to 3 attempts
    And the principal has an approved send of a draft to "bob@example.com"
    And the host will hold the next dispatch at the external call until the suite releases it
    When the agent starts dispatching the approved send as "interrupted"
    And the host has a dispatch paused at the external call
    And the operator registers the email contract again at version "2" allowing 3 attempts
    And the host crashes and is started again
    Then the host soon reports the operation "Unknown"
    And the destination received no message

  @req:agl.recovery.resumes-deduplicated-send @profile:agl-parley-binding @fixture:agl-store
  Scenario Outline: parley's binding: recovery resumes an interrupted send only under the contract it was approved with
    Given an AGL host whose fake email destination deduplicates by idempotency key
    And the AGL test seams are enabled
    And the host keeps its state where the suite can restart it
    And the hosts presume a silent host crashed after 1000 ms
    And the email contract is registered as deduplicated by destination key with up to 3 attempts
    And the principal has an approved send of a draft to "bob@example.com"
    And the host will hold the next dispatch at the external call until the suite releases it
    When the agent starts dispatching the approved send as "interrupted"
    And the host has a dispatch paused at the external call
    And <while it is claimed>
    And the host crashes and is started again
    Then the host soon reports the operation "<state>"
    And <settled>
    And the destination received <effects>

    Examples:
      | while it is claimed                                                                                                         | state               | settled                                                                                        | effects             |
      | the operator reads the principal's grant                                                                                    | ReconciledCompleted | the operation was settled by sending it again under its key                                    | exactly one message |
      | the operator registers the email contract again at version "2" allowing 3 attempts                                          | Unknown             | the audit trail of the operation soon says recovery stopped on "contract_fingerprint_mismatch" | no message          |
      | the resolver revokes the permit                                                                                             | Unknown             | the audit trail of the operation soon says recovery stopped on "permit_revoked"                | no message          |
      | the authorization service revokes the principal's grant                                                                     | Unknown             | the audit trail of the operation soon says recovery stopped on "grant_revoked"                 | no message          |
      | the operator changes the host's deployment policy to allow recipients only in "example.com, example.net" for its next start | Unknown             | the audit trail of the operation soon says recovery stopped on "policy_fingerprint_mismatch"   | no message          |
      | the operator moves the host's email account to another destination for its next start                                       | Unknown             | the audit trail of the operation soon says recovery stopped on "proposal_mismatch"             | no message          |

  @req:agl.recovery.no-regeneration @profile:agl-operation-store @fixture:agl-core
  Scenario Outline: A restart keeps an approved intent as it was, and it dispatches under its own id
    Given an AGL host with a fake email destination the suite counts
    And the host keeps its state where the suite can restart it
    And the principal has an approved send of a draft to "bob@example.com"
    When the host <restart>
    Then the host lists exactly the operations the proposals named for the execution
    And the operation is "Pending"
    When the agent dispatches the approved send
    Then the dispatch completed
    And the dispatch ran the operation the proposal named
    And the destination received exactly one message, carrying the operation id

    Examples:
      | restart                      |
      | crashes and is started again |
      | is restarted                 |

  @req:agl.recovery.no-regeneration @profile:agl-operation-store @fixture:agl-store
  Scenario: A send interrupted by a crash becomes Unknown, not a new request
    Given an AGL host with a fake email destination the suite counts
    And the AGL test seams are enabled
    And the host keeps its state where the suite can restart it
    And the hosts presume a silent host crashed after 1000 ms
    And the principal has an approved send of a draft to "bob@example.com"
    And the host will hold the next dispatch at the external call until the suite releases it
    When the agent starts dispatching the approved send as "interrupted"
    And the host has a dispatch paused at the external call
    And the host crashes and is started again
    Then the host soon reports the operation "Unknown"
    And the host lists exactly the operations the proposals named for the execution
    And the destination received no message
    When the agent dispatches the approved send
    Then the action is refused with status 409, code "uncertain_completion" and category "uncertain_completion"
    And the destination received no message

  @req:agl.durability.reconcile @profile:agl-operation-store @fixture:agl-core
  Scenario: Receiver lookup settles an Unknown send and records its evidence
    Given an AGL host with a fake email destination the suite counts
    And the principal has an approved send of a draft to "bob@example.com"
    And the destination will fail after taking effect on the next message
    When the agent dispatches the approved send
    Then the operation is "Unknown" and awaits reconciliation
    When the operator reconciles the operation by asking the destination
    Then the response status is 200
    And the operation is "ReconciledCompleted"
    And the reconciliation records method "receiver_lookup" and the destination's message id
    And the draft is "Sent"

  @req:agl.durability.reconcile @profile:agl-operation-store @fixture:agl-core
  Scenario: Only the resolver records a human reconciliation, and only of an Unknown operation
    Given an AGL host with a fake email destination the suite counts
    And the principal has an approved send of a draft to "bob@example.com"
    And the destination will fail after taking effect on the next message
    When the agent dispatches the approved send
    And the operator records that a human established the operation had no effect
    Then the response is refused with status 403 and code "wrong_credentials"
    And the operation is "Unknown" and awaits reconciliation
    When the resolver records that a human established the operation had no effect
    Then the operation is "ReconciledNoEffect"
    And the reconciliation records method "human" and the actor
    And the draft is "FailedNoEffect"
    When the resolver records that a human established the operation had an effect
    Then the response is refused with status 409 and code "not_awaiting_reconciliation"

  # Section 8 (with 6.3): revocation stops new attempts; settling an
  # operation that already went out reads a historical receipt, which stays
  # legal. Both reconciliation mechanisms, after each kind of revocation.
  @req:agl.durability.reconcile-after-revocation @profile:agl-operation-store @fixture:agl-core
  Scenario Outline: Revoking the permit or the grant does not stop the reconciliation of an earlier send
    Given an AGL host with a fake email destination the suite counts
    And the principal has an approved send of a draft to "bob@example.com"
    And the destination will fail after taking effect on the next message
    When the agent dispatches the approved send
    Then the operation is "Unknown" and awaits reconciliation
    When <revocation>
    And <reconciliation>
    Then the response status is 200
    And the operation is "ReconciledCompleted"
    And the reconciliation records method "<method>" and <evidence>
    And the draft is "Sent"
    And the destination received exactly one message

    Examples:
      | revocation                                              | reconciliation                                                              | method          | evidence                      |
      | the resolver revokes the permit                         | the operator reconciles the operation by asking the destination             | receiver_lookup | the destination's message id  |
      | the authorization service revokes the principal's grant | the operator reconciles the operation by asking the destination             | receiver_lookup | the destination's message id  |
      | the resolver revokes the permit                         | the resolver records that a human established the operation had an effect   | human           | the actor                     |

  # Section 12 lists the attempt among what an audit record carries, and
  # section 8 lets a host retry: every attempt after the first leaves its
  # own retry record with its number. A host that never retries has no
  # extra attempt to record (its operation says 1 attempt).
  @req:agl.audit.retry-attempts @profile:agl-operation-store @fixture:agl-core
  Scenario Outline: Every extra attempt leaves a retry audit record carrying its attempt number
    Given an AGL host whose fake email destination deduplicates by idempotency key
    And the email contract is registered as deduplicated by destination key with up to <max> attempts
    And the principal has an approved send of a draft to "bob@example.com"
    And the destination will fail after taking effect on the next <failures> messages
    When the agent dispatches the approved send
    Then the operation's audit trail holds one retry record for each attempt the operation made after the first, numbered from 2, and its claim record says attempt 1

    Examples:
      | max | failures |
      | 2   | 1        |
      | 3   | 2        |
      | 3   | 5        |

  # Section 6.3: a further attempt needs current authorization, and the MVP
  # stops when authority is revoked before it. A resend by recovery is such
  # an attempt: after a revocation while the send was claimed, recovery
  # sends nothing and the operation stays Unknown for reconciliation. A host
  # whose recovery never resends meets it; the audit record of the stop is
  # parley's binding (agl.recovery.resumes-deduplicated-send).
  @req:agl.recovery.authority-rechecked @profile:agl-operation-store @fixture:agl-store
  Scenario Outline: Recovery sends nothing for a claimed send whose authority was revoked
    Given an AGL host whose fake email destination deduplicates by idempotency key
    And the AGL test seams are enabled
    And the host keeps its state where the suite can restart it
    And the hosts presume a silent host crashed after 1000 ms
    And the email contract is registered as deduplicated by destination key with up to 3 attempts
    And the principal has an approved send of a draft to "bob@example.com"
    And the host will hold the next dispatch at the external call until the suite releases it
    When the agent starts dispatching the approved send as "interrupted"
    And the host has a dispatch paused at the external call
    And <revocation>
    And the host crashes and is started again
    Then the host soon reports the operation "Unknown"
    And the destination received no message

    Examples:
      | revocation                                              |
      | the resolver revokes the permit                         |
      | the authorization service revokes the principal's grant |

  # Section 8: recovery checks the deployment and the policy an operation
  # was approved under. Here the same host, on its own store, is started
  # again after a crash under a changed deployment (its operator changed the
  # policy, or moved the account to another destination, while the send was
  # claimed). Whatever the restarted host runs, the approval bound another
  # deployment: recovery sends nothing, and the operation stays Unknown for
  # reconciliation. A host whose recovery never resends meets it.
  @req:agl.recovery.deployment-changed-at-restart @profile:agl-operation-store @fixture:agl-store
  Scenario Outline: A host restarted under a changed deployment sends nothing for a claimed send, and leaves it Unknown
    Given an AGL host whose fake email destination deduplicates by idempotency key
    And the AGL test seams are enabled
    And the host keeps its state where the suite can restart it
    And the hosts presume a silent host crashed after 1000 ms
    And the email contract is registered as deduplicated by destination key with up to 3 attempts
    And the principal has an approved send of a draft to "bob@example.com"
    And the host will hold the next dispatch at the external call until the suite releases it
    When the agent starts dispatching the approved send as "interrupted"
    And the host has a dispatch paused at the external call
    And <change>
    And the host crashes and is started again
    Then the host soon reports the operation "Unknown"
    And no destination received a message

    Examples:
      | change                                                                                                                      |
      | the operator changes the host's deployment policy to allow recipients only in "example.com, example.net" for its next start |
      | the operator moves the host's email account to another destination for its next start                                       |
