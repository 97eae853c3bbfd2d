# agtp-rcns.txt, status code table (261 Negotiation In Progress) and
# "Negotiation Flow". The suite's policy sends PROPOSE for BOOK /suite/{id}
# to operator review ([policies.propose] review); the operator ("ops",
# holding inspect:all) decides with CONFIRM target_id=<proposal_id>
# status=approved|rejected. The proposer polls QUERY /proposals/{proposal_id}.
@fixture:agtp-confirm-first
Feature: Negotiation in progress
  A proposal accepted for evaluation but not yet decided answers 261; the
  agent polls QUERY /proposals/{proposal_id} until the terminal status.

  @req:agtp.propose.async.in-progress-261 @profile:agtp-rcns
  Scenario Outline: A proposal awaiting review answers 261 and polls as 261 [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And the operator reviews proposals for BOOK /suite/{id}
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" proposes BOOK /suite/{suite}
    Then the response status is 261 with a proposal_id
    And the AGTP body satisfies the schema "agtp/proposal-in-progress.json"
    When "alice" polls the proposal
    Then the response status is 261 with a proposal_id
    And "alice" holds no contract for BOOK /suite/{suite}

    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.propose.async.poll-terminal @profile:agtp-rcns
  Scenario Outline: Polling reaches the terminal status once the operator <decision> [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And the operator reviews proposals for BOOK /suite/{id}
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "ops" has trust tier 1 and is granted "inspect:all"
    And "alice" has a proposal awaiting review for BOOK /suite/{suite}
    When "ops" <decision> the proposal
    And "alice" polls the proposal until it is decided
    Then <outcome>

    Examples:
      | decision | outcome                                               | transport          |
      | approves | the response is a 263 for BOOK /suite/{suite}         | TLS 1.3            |
      | approves | the response is a 263 for BOOK /suite/{suite}         | plaintext loopback |
      | rejects  | the response status is 463 with reason policy-refused | TLS 1.3            |
      | rejects  | the response status is 463 with reason policy-refused | plaintext loopback |
