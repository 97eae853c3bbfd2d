# agtp-rcns.txt, "Contract Scoping and Lifecycle": the bindings enforced on
# every request presenting Contract-Synthesized, and the three release
# paths; agtp-wire-notes.md 7 for who may SUSPEND.
Feature: Contract scoping and lifecycle
  A contract is bound to its originating Agent-ID, its captured recipe
  version and its expiry. A wrong agent is refused contract-not-yours, an
  unknown synthesis_id is 404, an expired or revoked contract is
  contract-revoked. Contracts end by caller release, operator revocation or
  TTL.

  # Each way a contract comes to exist: the gate in either delivery mode,
  # PROPOSE (session-scoped, or persisted into the catalog), and a contract
  # the host kept across a restart. The originator presenting the same
  # contract is served: the refusal is for the other Agent-ID alone.
  @req:agtp.rcns.contract.not-yours @profile:agtp-rcns
  Scenario Outline: Another agent presenting a gate contract is refused contract-not-yours [<mode>, <transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets mode = "<mode>"
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "bob" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And "alice" holds an active contract for BOOK /room/{room}
    When "bob" sends BOOK /room/{room} presenting the contract
    Then the response status is 464 with reason contract-not-yours
    When "alice" sends BOOK /room/{room} presenting the contract
    Then the response is served under the contract

    @fixture:agtp-confirm-first
    Examples:
      | mode          | transport          |
      | confirm-first | TLS 1.3            |
      | confirm-first | plaintext loopback |

    @fixture:agtp-optimistic
    Examples:
      | mode          | transport          |
      | optimistic    | plaintext loopback |
      | optimistic    | TLS 1.3            |

  @req:agtp.rcns.contract.not-yours @profile:agtp-rcns
  Scenario Outline: Another agent presenting a PROPOSE contract is refused contract-not-yours (<how>) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.propose] sets allow_persistent = <allow>
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "bob" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" proposes BOOK /room/{room} <how> remembered as "mine"
    And "bob" sends BOOK /room/{room} presenting contract "mine"
    Then the response status is 464 with reason contract-not-yours
    When "alice" sends BOOK /room/{room} presenting contract "mine"
    Then the response is served under contract "mine"

    @fixture:agtp-confirm-first
    Examples:
      | how                   | allow | transport          |
      | in the wrapped form   | false | TLS 1.3            |
      | in the legacy form    | false | plaintext loopback |

    @fixture:agtp-optimistic
    Examples:
      | how                   | allow | transport          |
      | with persistent: true | true  | TLS 1.3            |
      | with persistent: true | true  | plaintext loopback |

  @req:agtp.rcns.contract.not-yours @profile:agtp-rcns
  Scenario Outline: A contract the host kept across a <restart> is still not another agent's [<transport>]
    Given an AGTP server reached over <transport>
    And the host keeps its state where the suite can restart it
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "bob" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And "alice" holds an active contract for BOOK /room/{room}
    When <restart step>
    And "bob" sends BOOK /room/{room} presenting the contract
    Then the response status is 464 with reason contract-not-yours
    When "alice" sends BOOK /room/{room} presenting the contract
    Then the response is served under the contract

    @fixture:agtp-confirm-first
    Examples:
      | restart       | restart step                          | transport          |
      | clean restart | the host is restarted                 | TLS 1.3            |
      | crash         | the host crashes and is started again | plaintext loopback |

  # The pair is one alice holds a contract for, so that a host ignoring the
  # presented id (and resolving, or running the gate) would serve it: the
  # 404 can only come from the unknown id.
  @req:agtp.rcns.contract.unknown-404 @profile:agtp-rcns
  Scenario Outline: An unknown synthesis_id is 404 (<how>) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets mode = "<mode>"
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And "alice" holds an active contract for BOOK /room/{room}
    When "alice" sends BOOK /room/{room} <how> an unknown synthesis_id
    Then the response status is 404
    When "alice" sends BOOK /room/{room} presenting the contract
    Then the response is served under the contract

    @fixture:agtp-confirm-first
    Examples:
      | how                              | mode          | transport          |
      | presenting                       | confirm-first | TLS 1.3            |
      | with Allow-RCNS: true presenting | confirm-first | plaintext loopback |

    @fixture:agtp-optimistic
    Examples:
      | how                              | mode          | transport          |
      | presenting                       | optimistic    | plaintext loopback |
      | with Allow-RCNS: true presenting | optimistic    | TLS 1.3            |

  @req:agtp.rcns.contract.expired-or-revoked-464 @profile:agtp-rcns
  Scenario Outline: A <ended> contract presented again is refused contract-revoked [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets contract_ttl_seconds = <ttl>
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "ops" has trust tier 1 and is granted "inspect:all"
    And "alice" holds an active contract for BOOK /room/{room}
    When <ending>
    And "alice" sends BOOK /room/{room} presenting the contract
    Then the response status is 464 with reason contract-revoked

    # A revoked contract lives an hour otherwise: it cannot expire first on
    # a slow run and be refused for that instead.
    @fixture:agtp-long-ttl
    Examples:
      | ended   | ending                                                       | ttl  | transport          |
      | revoked | "ops" sends REVOKE target=contract synthesis_id=the contract | 3600 | TLS 1.3            |
      | revoked | "ops" sends REVOKE target=contract synthesis_id=the contract | 3600 | plaintext loopback |

    # An expired contract: the host's clock is moved past its hour (clock
    # seam, host-wide, so these rows take their host alone), or, on a host
    # without the seam, a 2 s TTL is waited out in real time.
    @fixture:agtp-ttl-clock @exclusive
    Examples:
      | ended   | ending                                                       | ttl  | transport          |
      | expired | the contract's TTL has passed                                | 3600 | TLS 1.3            |
      | expired | the contract's TTL has passed                                | 3600 | plaintext loopback |

    @fixture:agtp-short-ttl
    Examples:
      | ended   | ending                                                       | ttl  | transport          |
      | expired | the contract's TTL has passed                                | 2    | TLS 1.3            |
      | expired | the contract's TTL has passed                                | 2    | plaintext loopback |

  @req:agtp.rcns.release.caller-suspend @profile:agtp-rcns
  Scenario Outline: The originator releases its contract with SUSPEND [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And "alice" holds an active contract for BOOK /room/{room}
    When "alice" sends SUSPEND synthesis_id=the contract
    Then the request succeeded
    When "alice" sends BOOK /room/{room} presenting the contract
    Then the response refuses the released contract

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.release.caller-suspend-event @profile:agtp-rcns
  Scenario Outline: A caller release is an rcns_release event in the agent's lifecycle stream [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And "alice" holds an active contract for BOOK /room/{room}
    When "alice" sends SUSPEND synthesis_id=the contract
    Then the request succeeded
    When "alice" reads its lifecycle stream
    Then the lifecycle stream has an rcns_release event for the contract

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.release.suspend-originator-only @profile:agtp-rcns
  Scenario Outline: Only the originator may SUSPEND a contract (<role>) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "bob" has trust tier 1 and is granted "<grant>"
    And "alice" holds an active contract for BOOK /room/{room}
    When "bob" sends SUSPEND synthesis_id=the contract
    Then the response status is 403
    When "alice" sends BOOK /room/{room} presenting the contract
    Then the response is served under the contract
    And "alice" can still release the contract

    @fixture:agtp-confirm-first
    Examples:
      | role                                 | grant                                | transport          |
      | another agent                        | rooms:*, rcns:negotiate              | TLS 1.3            |
      | another agent                        | rooms:*, rcns:negotiate              | plaintext loopback |
      | another agent holding inspect:all    | rooms:*, rcns:negotiate, inspect:all | TLS 1.3            |
      | another agent holding inspect:all    | inspect:all                          | plaintext loopback |

  @req:agtp.rcns.release.revoke-authorized @profile:agtp-rcns
  Scenario Outline: REVOKE target=contract is taken from the <role> [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "ops" has trust tier 1 and is granted "inspect:all"
    And "alice" holds an active contract for BOOK /room/{room}
    When "<who>" sends REVOKE target=contract synthesis_id=the contract
    Then the request succeeded
    When "alice" sends BOOK /room/{room} presenting the contract
    Then the response status is 464 with reason contract-revoked

    @fixture:agtp-confirm-first
    Examples:
      | role                        | who   | transport          |
      | originator                  | alice | TLS 1.3            |
      | originator                  | alice | plaintext loopback |
      | operator holding inspect:all | ops   | TLS 1.3            |
      | operator holding inspect:all | ops   | plaintext loopback |

  @req:agtp.rcns.release.revoke-authorized @profile:agtp-rcns
  Scenario Outline: REVOKE target=contract is refused to another agent without inspect:all (<grant>) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "bob" has trust tier 1 and is granted "<grant>"
    And "alice" holds an active contract for BOOK /room/{room}
    When "bob" sends REVOKE target=contract synthesis_id=the contract
    Then the response refuses it for want of inspect:all
    When "alice" sends BOOK /room/{room} presenting the contract
    Then the response is served under the contract

    @fixture:agtp-confirm-first
    Examples:
      | grant                   | transport          |
      | rooms:*, rcns:negotiate | TLS 1.3            |
      | rooms:*, rcns:negotiate | plaintext loopback |
      | rooms:read              | TLS 1.3            |
      | rooms:read              | plaintext loopback |

  @req:agtp.rcns.release.operator-revoke @profile:agtp-rcns
  Scenario Outline: The operator revokes a contract with REVOKE target=contract [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "ops" has trust tier 1 and is granted "inspect:all"
    And "alice" holds an active contract for BOOK /room/{room}
    When "ops" sends REVOKE target=contract synthesis_id=the contract
    Then the request succeeded
    When "alice" sends BOOK /room/{room} presenting the contract
    Then the response status is 464 with reason contract-revoked

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  # The host's expiry pass decides (the clock seam's advance runs it, or
  # the host's own pass in real time); the request path's own check is
  # agtp.rcns.contract.expiry-decided-on-request below.
  @req:agtp.rcns.release.ttl @profile:agtp-rcns
  Scenario Outline: A contract stops serving when its TTL has passed [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets contract_ttl_seconds = <ttl>
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And "alice" holds an active contract for BOOK /room/{room}
    When "alice" sends BOOK /room/{room} presenting the contract
    Then the response is served under the contract
    When the contract's TTL has passed
    And "alice" sends BOOK /room/{room} presenting the contract
    Then the response is not served under the contract
    When "alice" sends BOOK /room/{room} without Allow-RCNS
    Then the response is not served under the contract

    # Contracts live an hour; the host's clock is moved past it (clock
    # seam, host-wide, so these rows take their host alone).
    @fixture:agtp-ttl-clock @exclusive
    Examples:
      | ttl  | transport          |
      | 3600 | TLS 1.3            |
      | 3600 | plaintext loopback |

    # For a host without the clock seam: 2 s waited out in real time.
    @fixture:agtp-short-ttl
    Examples:
      | ttl | transport          |
      | 2   | TLS 1.3            |
      | 2   | plaintext loopback |

  # The request path decides: the host's clock passes the contract's
  # expires_at (as its 461 or 263 named it) through the clock seam, which
  # holds the host's expiry pass, so no background pass or sweep has released
  # the contract when it is presented. The contract is first shown serving.
  # Moving the clock is host-wide, so the scenario has its host alone.
  @req:agtp.rcns.contract.expiry-decided-on-request @profile:agtp-rcns @exclusive
  Scenario Outline: A contract presented after its expires_at is refused on the request path (<how>) [<transport>]
    Given an AGTP server reached over <transport>
    And the host's clock seam can hold its expiry pass
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And <obtains>
    When "alice" sends BOOK /room/{room} presenting the contract
    Then the response is served under the contract
    When the host's clock passes the contract's expires_at while its expiry pass is held
    And "alice" sends BOOK /room/{room} presenting the contract
    Then the response status is 464 with reason contract-revoked

    @fixture:agtp-confirm-first
    Examples:
      | how                   | obtains                                                     | transport          |
      | gate, confirm-first   | "alice" holds an active contract for BOOK /room/{room}      | TLS 1.3            |
      | gate, confirm-first   | "alice" holds an active contract for BOOK /room/{room}      | plaintext loopback |
      | PROPOSE, wrapped form | "alice" proposes BOOK /room/{room} remembered as "proposed" | TLS 1.3            |

    @fixture:agtp-optimistic
    Examples:
      | how                  | obtains                                                                        | transport          |
      | PROPOSE, legacy form | "alice" proposes BOOK /room/{room} in the legacy form remembered as "proposed" | plaintext loopback |
