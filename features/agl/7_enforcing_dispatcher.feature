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

  @req:agl.dispatch.step-order @profile:agl-core
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

  @req:agl.dispatch.step-order @profile:agl-core
  Scenario: The claim is persisted before the handler runs, the outcome before the answer
    Given the principal has an approved send of a draft to "bob@example.com"
    And the host will pause for 2500 ms at the external call
    When the agent starts dispatching the approved send
    Then while the call is paused the operation is "Claimed", the permit is consumed and the draft is "Dispatching"
    And while the call is paused the destination has received no message
    When the dispatch finishes
    Then the dispatch completed
    And the operation as read back is the one the dispatch answered
    And the audit trail of the operation records the claim before the outcome
    And the destination received exactly one message, carrying the operation id

  @req:agl.dispatch.intent-failure-prevents-dispatch @profile:agl-operation-store
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

  @req:agl.dispatch.result-persist-failure-is-unknown @profile:agl-operation-store
  Scenario: An outcome that cannot be persisted after the effect is Unknown
    Given the principal has an approved send of a draft to "bob@example.com"
    And the host will fail to persist the next outcome
    When the agent dispatches the approved send
    Then the response status is 200
    And the operation is "Unknown" and awaits reconciliation
    And the draft is "Unknown"
    And the destination received exactly one message

  @req:agl.dispatch.no-legacy-entry-point @profile:agl-core
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

  @req:agl.dispatch.handler-context @profile:agl-core
  Scenario Outline: The handler runs with the operation's identity, the grant and the permit
    Given the principal has an approved <action>
    When the agent dispatches the approved <kind>
    Then the dispatch completed
    And the <destination> received exactly one message naming the operation, the principal's grant and the permit

    Examples:
      | action                                               | kind     | destination |
      | send of a draft to "bob@example.com"                 | send     | destination |
      | transfer of 1500 to "DE89370400440532013000"         | transfer | ledger      |

  @req:agl.dispatch.handler-context @profile:agl-core
  Scenario: A handler acting under a delegated grant names that grant
    Given the principal has delegated its grant to a helper for the transfer operation only, expiring sooner
    And the helper's agent proposes a transfer of 200 to "DE89370400440532013000" under the delegated grant
    And approval of the proposal is requested
    And the resolver grants the approval
    When the helper's agent dispatches the approved transfer under the delegated grant
    Then the dispatch completed
    And the ledger received exactly one message naming the operation, the helper's grant and the permit
