# agtp-rcns.txt, "Tier C Resolution": the resolver that dispatches an
# unregistered pair to the requesting agent's active contract.
Feature: Tier C resolution
  An unregistered pair that resolves to an active contract of the
  requesting agent is served by the synthesized handler. Resolution is
  scoped by Agent-ID, and expired, revoked or released contracts do not
  resolve.

  @req:agtp.rcns.contract.resolver-serves-active @profile:agtp-rcns
  Scenario Outline: The originator's request for the pair is served under its contract [<mode>, <transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets mode = "<mode>"
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And "alice" holds an active contract for BOOK /room/{room}
    When "alice" sends BOOK /room/{room} without Allow-RCNS
    Then the response is served under the contract

    @fixture:agtp-confirm-first
    Examples:
      | mode          | transport          |
      | confirm-first | TLS 1.3            |
      | confirm-first | plaintext loopback |

    @fixture:agtp-optimistic
    Examples:
      | mode          | transport          |
      | optimistic    | TLS 1.3            |
      | optimistic    | plaintext loopback |

  @req:agtp.rcns.contract.resolver-scoped-by-agent @profile:agtp-rcns
  Scenario Outline: Another agent's request for the pair does not resolve to the contract [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "bob" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And "alice" holds an active contract for BOOK /room/{room}
    When "bob" sends BOOK /room/{room} without Allow-RCNS
    Then the response is not served under the contract
    And the response is either 464 contract-not-yours or the standard unregistered-pair refusal

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.contract.inactive-not-resolved @profile:agtp-rcns
  Scenario Outline: A <ended> contract no longer resolves [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets contract_ttl_seconds = <ttl>
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "ops" has trust tier 1 and is granted "inspect:all"
    And "alice" holds an active contract for BOOK /room/{room}
    When <ending>
    And "alice" sends BOOK /room/{room} without Allow-RCNS
    Then the response is not served under the contract

    # A contract its holder or an operator ends lives an hour otherwise: it
    # cannot expire first on a slow run.
    @fixture:agtp-long-ttl
    Examples:
      | ended    | ending                                                       | ttl  | transport          |
      | released | "alice" sends SUSPEND synthesis_id=the contract              | 3600 | TLS 1.3            |
      | released | "alice" sends SUSPEND synthesis_id=the contract              | 3600 | plaintext loopback |
      | revoked  | "ops" sends REVOKE target=contract synthesis_id=the contract | 3600 | TLS 1.3            |
      | revoked  | "ops" sends REVOKE target=contract synthesis_id=the contract | 3600 | plaintext loopback |

    # An expired contract: the host's clock is moved past its hour (clock
    # seam, host-wide, so these rows take their host alone), or, on a host
    # without the seam, a 2 s TTL is waited out in real time.
    @fixture:agtp-ttl-clock @exclusive
    Examples:
      | ended    | ending                                                       | ttl  | transport          |
      | expired  | the contract's TTL has passed                                | 3600 | TLS 1.3            |
      | expired  | the contract's TTL has passed                                | 3600 | plaintext loopback |

    @fixture:agtp-short-ttl
    Examples:
      | ended    | ending                                                       | ttl  | transport          |
      | expired  | the contract's TTL has passed                                | 2    | TLS 1.3            |
      | expired  | the contract's TTL has passed                                | 2    | plaintext loopback |
