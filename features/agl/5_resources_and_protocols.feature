# agl-behavioral-contracts.txt §5 Resources and protocol typing: 5.1 state
# belongs to a resource (the email protocol, handles, revisions, Unknown) and
# 5.3 dynamic choices (the effect ceiling holds whatever tool is chosen).
@fixture:agl-core
Feature: Resource protocols and handles
  An email draft moves through a finite protocol. Handles are issued and
  resolved only by the host. An edit makes a new revision that needs its own
  approval, and an Unknown outcome never becomes reusable again.

  Background:
    Given an AGL host with a fake email destination the suite counts
    And a principal whose agent may use the email and transfer operations under a grant from the authorization service

  @req:agl.protocol.states @profile:agl-core
  Scenario: An approved draft moves Draft, Proposed, Authorized, Dispatching and Sent
    Given the principal drafts an email to "bob@example.com"
    Then the draft is "Draft"
    When the agent proposes sending the draft
    Then the draft is "Proposed"
    When approval of the proposal is requested
    And the resolver grants the approval
    Then the draft is "Authorized"
    When the agent dispatches the approved send
    Then the dispatch completed
    And the draft is "Sent"
    And the audit trail of the operation shows the draft "Dispatching" when it was claimed

  @req:agl.protocol.states @profile:agl-core
  Scenario: A denied proposal leaves the draft Denied
    Given the principal drafts an email to "bob@example.com"
    When the agent proposes sending the draft
    And approval of the proposal is requested
    And the resolver denies the approval
    Then the draft is "Denied"

  @req:agl.protocol.states @profile:agl-core
  Scenario: A send the destination rejects leaves the draft FailedNoEffect
    Given the principal has an approved send of a draft to "bob@example.com"
    And the destination will reject the next message before any effect
    When the agent dispatches the approved send
    Then the response status is 200
    And the operation is "FailedNoEffect"
    And the draft is "FailedNoEffect"
    And the destination received no message

  @req:agl.protocol.states @profile:agl-core
  Scenario: A draft that is not Authorized cannot be dispatched
    Given the principal drafts an email to "bob@example.com"
    And the agent proposes sending the draft
    When the agent dispatches the send of the draft without a permit
    Then the action is refused with status 409, code "invalid_protocol_state" and category "invalid_protocol_state"
    And the destination received no message

  @req:agl.protocol.unknown-not-reusable @profile:agl-core
  Scenario: An Unknown send is never reusable, before or after reconciliation
    Given the principal has an approved send of a draft to "bob@example.com"
    And the destination will fail after taking effect on the next message
    When the agent dispatches the approved send
    Then the operation is "Unknown"
    And the draft is "Unknown"
    When the agent dispatches the approved send
    Then the action is refused with status 409, code "uncertain_completion" and category "uncertain_completion"
    When the principal edits the draft
    Then the response is refused with status 409 and code "invalid_protocol_state"
    When the operator reconciles the operation by asking the destination
    Then the operation is "ReconciledCompleted"
    And the draft is "Sent"
    When the agent dispatches the approved send
    Then the action is refused with status 409, code "permit_consumed" and category "permit_claimed"
    And the destination received exactly one message

  @req:agl.protocol.edit-invalidates-approval @profile:agl-core
  Scenario: An edit after approval voids the permit
    Given the principal has an approved send of a draft to "bob@example.com"
    When the principal edits the draft
    Then the draft is "Draft" at revision 2
    When the agent dispatches the approved send
    Then the action is refused with status 409, code "stale_revision" and category "stale_revision"
    When the agent dispatches the edited draft with the earlier permit
    Then the action is refused with status 409, code "invalid_protocol_state" and category "invalid_protocol_state"
    And the destination received no message

  @req:agl.protocol.edit-invalidates-approval @profile:agl-core
  Scenario: An edit while approval is pending invalidates the request
    Given the principal drafts an email to "bob@example.com"
    And the agent proposes sending the draft
    And approval of the proposal is requested
    When the principal edits the draft
    Then the approval request is "invalidated"
    When the resolver grants the approval
    Then the response is refused with status 409 and code "request_not_pending"
    And the draft is "Draft" at revision 2

  @req:agl.protocol.edit-invalidates-approval @profile:agl-core
  Scenario: The edited revision needs and gets its own approval
    Given the principal has an approved send of a draft to "bob@example.com"
    When the principal edits the draft
    And the agent proposes sending the draft
    And approval of the proposal is requested
    And the resolver grants the approval
    And the agent dispatches the approved send
    Then the dispatch completed
    And the destination received exactly one message, with the edited body

  @req:agl.protocol.independent-resources @profile:agl-core
  Scenario Outline: Two drafts in one workflow keep independent protocol states
    Given the principal drafts two emails, "first" and "second"
    When the agent proposes sending the "<moved>" draft
    Then the "<moved>" draft is "Proposed" and the "<other>" draft is "Draft"
    When approval of the proposal is requested
    And the resolver grants the approval
    Then the "<moved>" draft is "Authorized" and the "<other>" draft is "Draft"
    When the agent dispatches the approved send
    Then the "<moved>" draft is "Sent" and the "<other>" draft is "Draft"
    When the principal edits the "<other>" draft
    Then the "<moved>" draft is "Sent" and the "<other>" draft is "Draft" at revision 2

    Examples:
      | moved  | other  |
      | first  | second |
      | second | first  |

  @req:agl.protocol.handle-trusted-lookup @profile:agl-core
  Scenario Outline: Only a handle the host issued to the principal stands for a draft
    Given the principal drafts an email to "bob@example.com"
    When the agent proposes sending <handle>
    Then the action is refused with status <status>, code "<code>" and category "<category>"

    Examples:
      | handle                                        | status | code              | category             |
      | a handle it made up                           | 422    | unknown_handle    | schema_error         |
      | the draft's resource id instead of its handle | 422    | unknown_handle    | schema_error         |
      | another principal's draft handle              | 403    | authority_missing | authorization_denied |

  @req:agl.dispatch.effect-ceiling @profile:agl-core
  Scenario: Effects beyond the agent's ceiling are denied whichever tool it picks
    Given the operator sets the agent's effect ceiling to "external_write, email_send"
    When the agent proposes a transfer of 1500 to "DE89370400440532013000"
    Then the action is refused with status 403, code "effect_ceiling_exceeded" and category "authorization_denied"
    When the principal drafts an email to "bob@example.com"
    And the agent proposes sending the draft
    Then the response status is 201
