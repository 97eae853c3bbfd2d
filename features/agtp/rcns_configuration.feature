# agtp-rcns.txt, "RCNS Configuration": the knobs' defaults, observed on the
# wire with each knob left out of [policies.rcns].
Feature: RCNS configuration defaults
  A freshly installed server has RCNS off; enabled, it delivers
  confirm-first at the strictest trust tier.

  @req:agtp.rcns.config.default-disabled @profile:agtp-rcns
  Scenario Outline: RCNS is off unless enabled [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] leaves enabled unset
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends BOOK /room/{room} with Allow-RCNS: true
    Then the response status is 464 with reason rcns-disabled

    @fixture:agtp-rcns-unset
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.config.default-confirm-first @profile:agtp-rcns
  Scenario Outline: An enabled server without a mode delivers confirm-first [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] leaves mode unset
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends BOOK /room/{room} with Allow-RCNS: true
    Then the response status is 461
    And the room record {room} does not exist

    @fixture:agtp-short-ttl
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.config.default-min-tier-1 @profile:agtp-rcns
  Scenario Outline: Without min_trust_tier only tier 1 passes (tier <tier>) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] leaves min_trust_tier unset
    And its [policies.rcns] sets mode = "confirm-first"
    And agent "alice" has trust tier <tier> and is granted "rooms:*, rcns:negotiate"
    When "alice" sends BOOK /room/{room} with Allow-RCNS: true
    Then the response status is <answer>

    @fixture:agtp-confirm-first
    Examples:
      | tier | answer                                   | transport          |
      | 2    | 464 with reason trust-tier-insufficient | TLS 1.3            |
      | 2    | 464 with reason trust-tier-insufficient | plaintext loopback |
      | 1    | 461                                      | TLS 1.3            |
      | 1    | 461                                      | plaintext loopback |
