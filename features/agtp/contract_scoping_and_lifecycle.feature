# agtp-rcns.txt, "Contract Scoping and Lifecycle": the bindings enforced on
# every request presenting Contract-Synthesized, and the three release
# paths; agtp-wire-notes.md 7 for who may SUSPEND.
Feature: Contract scoping and lifecycle
  A contract is bound to its originating Agent-ID, its captured recipe
  version and its expiry. A wrong agent is refused contract-not-yours, an
  unknown synthesis_id is 404, an expired or revoked contract is
  contract-revoked. Contracts end by caller release, operator revocation or
  TTL.

  @req:agtp.rcns.contract.not-yours @profile:agtp-rcns
  Scenario Outline: Another agent presenting an active contract is refused contract-not-yours [<mode>, <transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets mode = "<mode>"
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "bob" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And "alice" holds an active contract for BOOK /room/{room}
    When "bob" sends BOOK /room/{room} presenting the contract
    Then the response status is 464 with reason contract-not-yours

    Examples:
      | mode          | transport          |
      | confirm-first | TLS 1.3            |
      | optimistic    | plaintext loopback |
      | confirm-first | plaintext loopback |
      | optimistic    | TLS 1.3            |

  @req:agtp.rcns.contract.unknown-404 @profile:agtp-rcns
  Scenario Outline: An unknown synthesis_id is 404 [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends BOOK /room/{room} presenting an unknown synthesis_id
    Then the response status is 404

    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.contract.expired-or-revoked-464 @profile:agtp-rcns
  Scenario Outline: A <ended> contract presented again is refused contract-revoked [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets contract_ttl_seconds = 2
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "ops" has trust tier 1 and is granted "inspect:all"
    And "alice" holds an active contract for BOOK /room/{room}
    When <ending>
    And "alice" sends BOOK /room/{room} presenting the contract
    Then the response status is 464 with reason contract-revoked

    Examples:
      | ended   | ending                                                       | transport          |
      | revoked | "ops" sends REVOKE target=contract synthesis_id=the contract | TLS 1.3            |
      | revoked | "ops" sends REVOKE target=contract synthesis_id=the contract | plaintext loopback |
      | expired | the contract's TTL has passed                                | TLS 1.3            |
      | expired | the contract's TTL has passed                                | plaintext loopback |

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

    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.release.suspend-originator-only @profile:agtp-rcns
  Scenario Outline: Only the originator may SUSPEND a contract [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "bob" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And "alice" holds an active contract for BOOK /room/{room}
    When "bob" sends SUSPEND synthesis_id=the contract
    Then the response status is 403
    When "alice" sends BOOK /room/{room} presenting the contract
    Then the response is served under the contract

    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

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

    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.release.ttl @profile:agtp-rcns
  Scenario Outline: A contract stops serving when its TTL has passed [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets contract_ttl_seconds = 2
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And "alice" holds an active contract for BOOK /room/{room}
    When "alice" sends BOOK /room/{room} presenting the contract
    Then the response is served under the contract
    When the contract's TTL has passed
    And "alice" sends BOOK /room/{room} presenting the contract
    Then the response is not served under the contract
    When "alice" sends BOOK /room/{room} without Allow-RCNS
    Then the response is not served under the contract

    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |
