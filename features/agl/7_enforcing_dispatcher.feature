# agl-behavioral-contracts.txt §7 Enforcing dispatcher: the nine steps in
# order, and what a failure to persist the intent or the result means.
# Fault injection uses the seams of docs/agl-binding.md §7.
Feature: The enforcing dispatcher
  Every protected call passes one dispatcher that checks, in order, the
  contract, the arguments, authority, effects and protocol state, the
  approval, admission, and then claims and persists the intent before it
  calls the handler; the outcome is persisted before the caller hears it.

  Background:
    Given an AGL host with a fake email destination the suite counts
    And the AGL test seams are enabled
    And a principal whose agent may use the email and transfer operations under a grant from the authorization service

  @req:agl.dispatch.step-order @profile:agl-core @fixture:agl-core
  Scenario Outline: When several checks fail, the earliest step refuses
    Given the principal has an approved send of a draft to "bob@example.com"
    And <faults>
    When the agent dispatches the approved send
    Then the action is refused at step <step> with code "<code>"
    And the destination received no message

    Examples:
      | faults                                                                                  | step | code                    |
      | the operation is unknown to the host, the arguments are malformed and no grant is given | 1    | unknown_operation       |
      | the arguments are malformed, no grant is given and the permit was revoked               | 2    | schema_error            |
      | no grant is given, the agent's effect ceiling is empty and the permit was revoked       | 3    | authority_missing       |
      | the agent's effect ceiling is empty and the permit was revoked                          | 4    | effect_ceiling_exceeded |
      | the permit was revoked                                                                  | 5    | permit_revoked          |
      | the host will fail to persist the next claim                                            | 7    | persistence_failure     |

  @req:agl.dispatch.step-order @profile:agl-core @fixture:agl-core
  Scenario: The claim is persisted before the handler runs, the outcome before the answer
    Given the principal has an approved send of a draft to "bob@example.com"
    And the host will hold the next dispatch at the external call until the suite releases it
    When the agent starts dispatching the approved send
    Then while the call is paused the operation is "Claimed", the permit is consumed and the draft is "Dispatching"
    And while the call is paused the destination has received no message
    When the suite releases the dispatch held at the external call
    And the dispatch finishes
    Then the dispatch completed
    And the operation as read back is the one the dispatch answered
    And the audit trail of the operation records the claim before the outcome
    And the destination received exactly one message, carrying the operation id

  @req:agl.dispatch.intent-failure-prevents-dispatch @profile:agl-operation-store @fixture:agl-core
  Scenario: A claim that cannot be persisted dispatches nothing and consumes nothing
    Given the principal has an approved send of a draft to "bob@example.com"
    And the host will fail to persist the next claim
    When the agent dispatches the approved send
    Then the action is refused with status 500, code "persistence_failure" and category "persistence_failure"
    And the refusal says no effect happened
    And the destination received no message
    And the permit is not consumed
    And the operation is "Pending"
    And the audit trail of the operation records no claim
    When the agent dispatches the approved send
    Then the dispatch completed
    And the destination received exactly one message

  @req:agl.dispatch.result-persist-failure-is-unknown @profile:agl-operation-store @fixture:agl-core
  Scenario: An outcome that cannot be persisted after the effect is Unknown
    Given the principal has an approved send of a draft to "bob@example.com"
    And the host will fail to persist the next outcome
    When the agent dispatches the approved send
    Then the response status is 200
    And the operation is "Unknown" and awaits reconciliation
    And the draft is "Unknown"
    And the destination received exactly one message

  @req:agl.dispatch.no-legacy-entry-point @profile:agl-core @fixture:agl-core
  Scenario Outline: The legacy entry point serves unprotected tools but refuses a protected handler
    When the caller asks the legacy entry point to run "legacy.echo"
    Then the legacy entry point answered with the arguments it was given
    When the caller asks the legacy entry point to run "<handler>"
    Then the response is refused with status 403 and code "protected_handler"
    And no request reached the destination or the ledger

    Examples:
      | handler         |
      | mail.send_email |
      | email.send/v1   |
      | ledger.transfer |
      | webhook.post/v1 |

  @req:agl.dispatch.handler-context @profile:agl-core @fixture:agl-core
  Scenario Outline: The handler runs with the operation's identity, the grant and the permit
    Given the principal has an approved <action>
    When the agent dispatches the approved <kind>
    Then the dispatch completed
    And the <destination> received exactly one message naming the operation, the principal's grant and the permit

    Examples:
      | action                                       | kind     | destination |
      | send of a draft to "bob@example.com"         | send     | destination |
      | transfer of 1500 to "DE89370400440532013000" | transfer | ledger      |

  @req:agl.dispatch.handler-context @profile:agl-core @fixture:agl-core
  Scenario: A handler acting under a delegated grant names that grant
    Given the principal has delegated its grant to a helper for the transfer operation only, expiring sooner
    And the helper's agent proposes a transfer of 200 to "DE89370400440532013000" under the delegated grant
    And approval of the proposal is requested
    And the resolver grants the approval
    When the helper's agent dispatches the approved transfer under the delegated grant
    Then the dispatch completed
    And the ledger received exactly one message naming the operation, the helper's grant and the permit

  @req:agl.dispatch.admission-rechecks-authority @profile:agl-core @fixture:agl-core
  Scenario Outline: Authority revoked while a dispatch waits for capacity stops that dispatch
    Given the host admits 1 dispatch at a time and lets a dispatch wait 300000 ms for capacity
    And the principal has an approved send of a draft to "bob@example.com"
    And the host will hold the next dispatch at the external call until the suite releases it
    When the agent starts dispatching the approved send as "first"
    And the host has a dispatch paused at the external call
    And the principal has an approved send of a draft to "carol@example.com"
    And the agent starts dispatching the approved send as "second"
    And the host has a dispatch waiting for capacity
    And <revocation>
    And the suite releases the dispatch held at the external call
    And dispatch "second" finishes
    Then the action is refused at step 6 with code "<code>"
    And the refusal is not dressed as a network error and is not retryable
    When dispatch "first" finishes
    Then the dispatch completed
    And the destination received exactly one message
    And the permit is not consumed

    Examples:
      | revocation                                              | code           |
      | the resolver revokes the permit                         | permit_revoked |
      | the authorization service revokes the principal's grant | grant_revoked  |

  @req:agl.dispatch.admission-rechecks-authority @profile:agl-core @fixture:agl-core
  Scenario: A dispatch that waited for capacity goes on once its authority is checked again
    Given the host admits 1 dispatch at a time and lets a dispatch wait 300000 ms for capacity
    And the principal has an approved send of a draft to "bob@example.com"
    And the host will hold the next dispatch at the external call until the suite releases it
    When the agent starts dispatching the approved send as "first"
    And the host has a dispatch paused at the external call
    And the principal has an approved send of a draft to "carol@example.com"
    And the agent starts dispatching the approved send as "second"
    And the host has a dispatch waiting for capacity
    And the suite releases the dispatch held at the external call
    And dispatch "second" finishes
    Then the dispatch completed
    When dispatch "first" finishes
    Then the dispatch completed
    And the destination received 2 messages

  @req:agl.dispatch.capacity-released @profile:agl-core @fixture:agl-core
  Scenario Outline: Capacity reserved for a dispatch whose claim fails is released
    Given the host admits 1 dispatch at a time and lets a dispatch wait 8000 ms for capacity
    And the principal has an approved send of a draft to "bob@example.com"
    And the host will fail to persist the next <failures> claims
    When the agent dispatches the approved send <failures> times, one after another
    Then each of those dispatches was refused with status 500, code "persistence_failure" and no effect
    And the host holds no admission slot and no budget reservation
    When the agent dispatches the approved send
    Then the dispatch completed
    And the destination received exactly one message

    Examples:
      | failures |
      | 1        |
      | 2        |
      | 3        |

  @req:agl.dispatch.budget-not-refunded @profile:agl-core @fixture:agl-core
  Scenario Outline: Budget charged for an attempted operation is not refunded when it failed or is uncertain
    Given the operator gives the execution a budget of 2 tool calls
    And the principal has an approved send of a draft to "bob@example.com"
    And the destination will <first outcome>
    When the agent dispatches the approved send
    Then the operation is "<state>"
    And the execution's budget shows 1 tool call used
    When the agent dispatches an approved send in scope "none"
    Then the dispatch completed
    And the execution's budget shows 2 tool calls used
    When the agent dispatches an approved send in scope "none"
    Then the action is refused with status 403, code "budget_exhausted" and category "capacity"
    And the refusal names the execution's budget as the one spent
    And the destination received <messages> messages

    Examples:
      | first outcome                                                  | state          | messages |
      | fail after taking effect on the next message                   | Unknown        | 2        |
      | answer unreadable JSON after taking effect on the next message | Unknown        | 2        |
      | reject the next message before any effect                      | FailedNoEffect | 1        |

  @req:agl.cancel.before-claim @profile:agl-core @fixture:agl-core
  Scenario: Cancelling a dispatch that waits for capacity stops it and leaves its permit usable
    Given the host admits 1 dispatch at a time and lets a dispatch wait 300000 ms for capacity
    And the principal has an approved send of a draft to "bob@example.com"
    And the host will hold the next dispatch at the external call until the suite releases it
    When the agent starts dispatching the approved send as "first"
    And the host has a dispatch paused at the external call
    And the principal has an approved send of a draft to "carol@example.com"
    And the agent starts dispatching the approved send as "second"
    And the host has a dispatch waiting for capacity
    And the agent cancels the operation of dispatch "second"
    Then the cancellation came before the claim
    When dispatch "second" finishes
    Then the action is refused with status 409, code "cancelled" and category "cancelled"
    When the suite releases the dispatch held at the external call
    And dispatch "first" finishes
    Then the dispatch completed
    And the destination received exactly one message
    And the permit is not consumed
    And the draft is "Authorized"
    When the agent dispatches the approved send
    Then the dispatch completed
    And the destination received 2 messages

  @req:agl.cancel.before-claim @profile:agl-core @fixture:agl-core @exclusive
  Scenario: Cancelling a dispatch inside its claim rolls the claim back and leaves the permit usable
    Given the principal has an approved send of a draft to "bob@example.com"
    And the host will hold the next dispatch in the claim until the suite releases it
    When the agent starts dispatching the approved send as "only"
    And the host has a dispatch paused in the claim
    And the agent cancels the operation of dispatch "only"
    Then the cancellation came before the claim
    When the suite releases the dispatch held in the claim
    And dispatch "only" finishes
    Then the action is refused with status 409, code "cancelled" and category "cancelled"
    And the destination received no message
    And the permit is not consumed
    And the operation is "Pending"
    And the draft is "Authorized"
    When the agent dispatches the approved send
    Then the dispatch completed
    And the destination received exactly one message

  @req:agl.cancel.after-effect-started @profile:agl-core @fixture:agl-core
  Scenario Outline: Cancelling after the external call started leaves the operation Unknown and the permit consumed
    Given the principal has an approved send of a draft to "bob@example.com"
    And the destination will <hang> on the next message
    When the agent starts dispatching the approved send as "only"
    And the first attempt has reached the destination
    And the agent cancels the operation of dispatch "only"
    Then the cancellation came after the claim
    When dispatch "only" finishes
    Then the response status is 200
    And the operation is "Unknown" and awaits reconciliation
    And the permit is consumed
    And the draft is "Unknown"
    When the agent dispatches the approved send
    Then the action is refused with status 409, code "uncertain_completion" and category "uncertain_completion"
    When the operator reconciles the operation by asking the destination
    Then the operation is "<reconciled>"
    And the destination received <effects>

    Examples:
      | hang                       | reconciled          | effects             |
      | hang after taking effect   | ReconciledCompleted | exactly one message |
      | hang without taking effect | ReconciledNoEffect  | no message          |

  # Section 7 step 6 (with 6.3): authority is checked again after the wait
  # for capacity; a permit whose expiry passes during that wait is refused
  # there, as a revoked one is above. The clock moves (seam) or the suite
  # waits; either way the permit was valid when the dispatch began to wait.
  @req:agl.dispatch.admission-rechecks-authority @profile:agl-core @fixture:agl-core @exclusive
  Scenario: A permit that expires while its dispatch waits for capacity is refused at the re-check
    Given the suite moves the host's clock instead of waiting, where the host offers the clock seam
    And the host admits 1 dispatch at a time and lets a dispatch wait 300000 ms for capacity
    And the principal has an approved send of a draft to "bob@example.com"
    And the host will hold the next dispatch at the external call until the suite releases it
    When the agent starts dispatching the approved send as "first"
    And the host has a dispatch paused at the external call
    And the principal has an approved send of a draft to "carol@example.com" whose permit lasts 2 seconds, or 600 where the suite moves the host's clock
    And the agent starts dispatching the approved send as "second"
    And the host has a dispatch waiting for capacity
    And the permit has expired
    And the suite releases the dispatch held at the external call
    And dispatch "second" finishes
    Then the action is refused at step 6 with code "permit_expired"
    And the refusal is not dressed as a network error and is not retryable
    When dispatch "first" finishes
    Then the dispatch completed
    And the destination received exactly one message
    And the permit is not consumed

  # Section 7 step 6 and section 9 (admission reserves concurrency before
  # work starts): a dispatch whose wait for a slot runs out is refused as
  # capacity unavailable (retryable: nothing was claimed), sends nothing,
  # and the host never runs more dispatches than the account admits. The
  # slot is held by a dispatch the host holds before its external call until
  # the suite releases it, after the second dispatch was answered: no
  # deadline of the host's runs out while the scenario observes, and no
  # step has to catch the second dispatch inside its 8 s wait. A host whose
  # seam cannot hold pauses the first dispatch 12 s instead, past the wait
  # and inside the handler's 30 s.
  @req:agl.dispatch.admission-wait-expires @profile:agl-core @fixture:agl-core
  Scenario: A dispatch whose wait for capacity runs out is refused and sends nothing
    Given the host admits 1 dispatch at a time and lets a dispatch wait 8000 ms for capacity
    And the AGL test seams are enabled
    And the host gives a handler 30000 ms to answer
    And the principal has an approved send of a draft to "bob@example.com"
    And the host will hold the next dispatch at the external call until the suite releases it, or pause 12000 ms where it cannot hold
    When the agent starts dispatching the approved send as "first"
    And the host has a dispatch paused at the external call
    And the principal has an approved send of a draft to "carol@example.com"
    And the agent starts dispatching the approved send as "second"
    And dispatch "second" finishes
    Then the action is refused at step 6 with code "capacity_unavailable"
    And the permit is not consumed
    When the suite releases the dispatch held at the external call
    And dispatch "first" finishes
    Then the dispatch completed
    And the destination was sent only dispatch "first"'s message
    And the host soon holds no admission slot for the account
