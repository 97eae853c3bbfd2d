# agtp-rcns.txt, "Delivery Modes": confirm-first (461) and optimistic
# (the action's own success with Contract-Synthesized).
Feature: Delivery modes
  Confirm-first previews the contract in a 461 and executes nothing until
  the caller re-issues the request presenting the synthesis_id; the preview
  is bound to the agent it was issued to. Optimistic executes inline and
  says so with the Contract-Synthesized header.

  @req:agtp.rcns.delivery.confirm-first-body @profile:agtp-rcns
  Scenario Outline: Confirm-first answers a complete 461 preview [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets mode = "confirm-first"
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends BOOK /room/{room} with Allow-RCNS: true
    Then the response is a 461 contract preview for BOOK /room/{room}

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.delivery.confirm-first-no-execution @profile:agtp-rcns
  Scenario Outline: A 461 preview executes nothing [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets mode = "confirm-first"
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends BOOK /room/{room} with Allow-RCNS: true
    Then the response status is 461
    And the room record {room} does not exist

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.delivery.accept-by-reissue @profile:agtp-rcns
  Scenario Outline: Re-issuing with Contract-Synthesized accepts the preview and executes [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets mode = "confirm-first"
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends BOOK /room/{room} with Allow-RCNS: true
    Then the response status is 461
    When "alice" sends BOOK /room/{room} presenting the contract
    Then the response is served under the contract
    And the room record {room} exists

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.delivery.bound-at-issue @profile:agtp-rcns
  Scenario Outline: A preview is bound to the agent it was issued to [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets mode = "confirm-first"
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "bob" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends BOOK /room/{room} with Allow-RCNS: true
    Then the response status is 461
    When "bob" sends BOOK /room/{room} presenting the contract
    Then the response status is 464 with reason contract-not-yours
    And the room record {room} does not exist
    When "alice" accepts the preview

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.delivery.optimistic-header @profile:agtp-rcns
  Scenario Outline: Optimistic mode executes inline and carries Contract-Synthesized [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets mode = "optimistic"
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends BOOK /room/{room} with Allow-RCNS: true
    Then the response is a success carrying Contract-Synthesized
    And the response is served under the contract
    And the room record {room} exists

    @fixture:agtp-optimistic
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |
