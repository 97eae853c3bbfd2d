# agtp-rcns.txt, "The Four-Lock Dispatcher Gate" and its refusal mapping;
# agtp-wire-notes.md 4 for RCNS-Attempt-Id. Every outline runs over TLS 1.3
# and over plaintext loopback.
Feature: The four-lock dispatcher gate
  Synthesis fires only when the operator's policy, the caller's opt-in
  header, the caller's rcns:negotiate scope and its trust tier all allow it.
  Each closed lock has its own refusal; a closed lock never synthesizes; a
  request that presents an issued contract never reaches the gate.

  @req:agtp.rcns.gate.server-policy-disabled @profile:agtp-rcns
  Scenario Outline: The server policy lock closed answers 464 rcns-disabled [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = false
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends BOOK /room/{room} with Allow-RCNS: true
    Then the response status is 464 with reason rcns-disabled

    @fixture:agtp-rcns-disabled
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.gate.opt-in-unsignaled @profile:agtp-rcns
  Scenario Outline: Without the caller's opt-in the unregistered pair is refused as usual [<header> <target>, <transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends BOOK <target> <header>
    Then the response is the standard unregistered-pair refusal
    And "alice" holds no contract for BOOK <target>

    @fixture:agtp-confirm-first
    Examples:
      | header                   | target      | transport          |
      | without Allow-RCNS       | /room/{room} | TLS 1.3            |
      | without Allow-RCNS       | /room/{room} | plaintext loopback |
      | with Allow-RCNS: false   | /room/{room} | TLS 1.3            |
      | with Allow-RCNS: yes     | /room/{room} | plaintext loopback |
      | with Allow-RCNS: 1       | /room       | TLS 1.3            |
      | without Allow-RCNS       | /room       | plaintext loopback |

  @req:agtp.rcns.gate.scope-required @profile:agtp-rcns
  Scenario Outline: A granted but unclaimed rcns:negotiate answers 262 scope-required [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends BOOK /room/{room} with Allow-RCNS: true claiming "rooms:write"
    Then the response status is 262 with reason scope-required naming scope rcns:negotiate

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.gate.scope-exceeded @profile:agtp-rcns
  Scenario Outline: An identity document without rcns:negotiate answers 455 scope-exceeded [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*"
    When "alice" sends BOOK /room/{room} with Allow-RCNS: true
    Then the response status is 455 with reason scope-exceeded naming scope rcns:negotiate

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.gate.trust-tier-insufficient @profile:agtp-rcns
  Scenario Outline: Trust tier against min_trust_tier 2 (tier <tier>) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets min_trust_tier = 2
    And its [policies.rcns] sets mode = "confirm-first"
    And agent "alice" has trust tier <tier> and is granted "rooms:*, rcns:negotiate"
    When "alice" sends BOOK /room/{room} with Allow-RCNS: true
    Then the response status is <answer>

    @fixture:agtp-gate-strict
    Examples:
      | tier | answer                                   | transport          |
      | 3    | 464 with reason trust-tier-insufficient | TLS 1.3            |
      | 3    | 464 with reason trust-tier-insufficient | plaintext loopback |
      | 2    | 461                                      | TLS 1.3            |
      | 1    | 461                                      | plaintext loopback |

  # "holds no contract" is witnessed through the Tier C resolver, which must
  # serve an agent's plain request for a pair it holds an active contract
  # for; it is shown decisive by a control contract the suite's own agent
  # obtains through the gate, so it needs the policy lock open. With the
  # policy lock closed no contract can exist at all, and the refusal itself
  # and the unexecuted action are what is observed.
  @req:agtp.rcns.gate.closed-lock-no-synthesis @profile:agtp-rcns
  Scenario Outline: A closed lock synthesizes nothing (<lock>) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets min_trust_tier = 2
    And agent "alice" has trust tier <tier> and is granted "<grant>"
    When "alice" sends BOOK /room/{room} <how>
    Then the answer is the <lock> lock's refusal
    And the response names no synthesis_id
    And "alice" holds no contract for BOOK /room/{room}
    And the room record {room} does not exist

    @fixture:agtp-gate-strict
    Examples:
      | lock          | tier | grant                   | how                                                     | transport          |
      | opt-in        | 1    | rooms:*, rcns:negotiate | without Allow-RCNS                                      | plaintext loopback |
      | opt-in        | 1    | rooms:*, rcns:negotiate | with Allow-RCNS: false                                  | TLS 1.3            |
      | scope claim   | 1    | rooms:*, rcns:negotiate | with Allow-RCNS: true claiming "rooms:read, rooms:write" | TLS 1.3            |
      | scope claim   | 1    | rooms:*, rcns:negotiate | with Allow-RCNS: true claiming "rooms:*"                | plaintext loopback |
      | scope grant   | 1    | rooms:*                 | with Allow-RCNS: true                                   | plaintext loopback |
      | trust tier    | 3    | rooms:*, rcns:negotiate | with Allow-RCNS: true                                   | TLS 1.3            |
      | trust tier    | 3    | rooms:*, rcns:negotiate | with Allow-RCNS: true                                   | plaintext loopback |

  @req:agtp.rcns.gate.closed-lock-no-synthesis @profile:agtp-rcns
  Scenario Outline: A closed server policy lock synthesizes nothing [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = false
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends BOOK /room/{room} with Allow-RCNS: true
    Then the answer is the server policy lock's refusal
    And the response names no synthesis_id
    And the room record {room} does not exist

    @fixture:agtp-rcns-disabled
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.gate.presented-contract-skips-gate @profile:agtp-rcns
  Scenario Outline: A presented contract is served without a new synthesis (<how>) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And "alice" holds an active contract for BOOK /room/{room}
    When "alice" sends BOOK /room/{room} <how>
    Then the response is served under the contract
    And once "alice" releases the contract, no other contract of its serves BOOK /room/{room}

    @fixture:agtp-confirm-first
    Examples:
      | how                                           | transport          |
      | presenting the contract                       | TLS 1.3            |
      | presenting the contract                       | plaintext loopback |
      | with Allow-RCNS: true presenting the contract | TLS 1.3            |
      | with Allow-RCNS: true presenting the contract | plaintext loopback |

  @req:agtp.rcns.gate.attempt-id-on-464 @profile:agtp-rcns
  Scenario Outline: Every gate 464 carries its own RCNS-Attempt-Id [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = false
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends BOOK /room/{room} with Allow-RCNS: true
    Then the answer is the server policy lock's refusal
    And the response carries a fresh RCNS-Attempt-Id
    When "alice" sends BOOK /room/{room} with Allow-RCNS: true
    Then the answer is the server policy lock's refusal
    And the response carries a fresh RCNS-Attempt-Id

    @fixture:agtp-rcns-disabled
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.gate.attempt-id-on-464 @profile:agtp-rcns
  Scenario Outline: A 464 on lock 4 or on contract resolution carries an RCNS-Attempt-Id [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets min_trust_tier = 2
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "bob" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "trudy" has trust tier 3 and is granted "rooms:*, rcns:negotiate"
    When "trudy" sends BOOK /room/{room2} with Allow-RCNS: true
    Then the answer is the trust tier lock's refusal
    And the response carries a fresh RCNS-Attempt-Id
    Given "alice" holds an active contract for BOOK /room/{room}
    When "bob" sends BOOK /room/{room} presenting the contract
    Then the answer is the contract-not-yours refusal
    And the response carries a fresh RCNS-Attempt-Id

    @fixture:agtp-gate-strict
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  # A failed composition may be refused synthesis-error or
  # composition-impossible (docs/interpretations.md).
  @req:agtp.rcns.gate.attempt-id-on-464 @profile:agtp-rcns
  Scenario Outline: A 464 for a pair nothing composes, or whose composition fails, carries an RCNS-Attempt-Id (<case>) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends BOOK <path> with Allow-RCNS: true
    Then the response <refusal>
    And the response carries a fresh RCNS-Attempt-Id

    @fixture:agtp-confirm-first
    Examples:
      | case              | path         | refusal                                          | transport          |
      | nothing composes  | /desk/{desk} | status is 464 with reason composition-impossible | TLS 1.3            |
      | composition fails | /hall/{hall} | is 464 for a composition that failed             | plaintext loopback |

  @req:agtp.rcns.gate.attempt-id-on-464 @profile:agtp-rcns
  Scenario Outline: A 464 for a revoked contract presented again carries an RCNS-Attempt-Id [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "ops" has trust tier 1 and is granted "inspect:all"
    And "alice" holds an active contract for BOOK /room/{room}
    When "ops" sends REVOKE target=contract synthesis_id=the contract
    And "alice" sends BOOK /room/{room} presenting the contract
    Then the response status is 464 with reason contract-revoked
    And the response carries a fresh RCNS-Attempt-Id

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  # The gate is open (the same agent is delivered a contract for a pair a
  # recipe composes), so the 464 is about the pair alone.
  @req:agtp.rcns.gate.composition-impossible @profile:agtp-rcns
  Scenario Outline: An open gate with nothing to compose the pair answers 464 composition-impossible (<method> <path>, <mode>) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets mode = "<mode>"
    And method <method> is a catalog verb or a custom method the server declares
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends <method> <path> with Allow-RCNS: true
    Then the response status is 464 with reason composition-impossible
    And the response names no synthesis_id
    When "alice" sends BOOK /room/{room} with Allow-RCNS: true
    Then the response delivers a contract

    @fixture:agtp-confirm-first
    Examples:
      | method  | path         | mode          | transport          |
      | BOOK    | /desk/{desk} | confirm-first | TLS 1.3            |
      | RESERVE | /room/{room2} | confirm-first | plaintext loopback |

    @fixture:agtp-optimistic
    Examples:
      | method  | path         | mode          | transport          |
      | LIST    | /desk/{desk} | optimistic    | plaintext loopback |
      | PENCIL  | /room/{room2} | optimistic    | TLS 1.3            |

  # Recipe hall-booking covers BOOK /hall/{id} but composes a capability the
  # server does not have: synthesis is attempted and fails. The text names
  # synthesis-error in the vocabulary and defines composition-impossible
  # for a server that cannot compose (PROPOSE step 6): either is accepted,
  # and the bundle records which (agtp.failed-composition-reason).
  @req:agtp.rcns.gate.synthesis-error @profile:agtp-rcns
  Scenario Outline: An open gate whose composition fails answers 464 (<mode>) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets mode = "<mode>"
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends BOOK /hall/{hall} with Allow-RCNS: true
    Then the response is 464 for a composition that failed
    And the response names no synthesis_id
    When "alice" sends BOOK /room/{room} with Allow-RCNS: true
    Then the response delivers a contract

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

  @req:agtp.rcns.gate.registered-not-synthesized @profile:agtp-rcns
  Scenario Outline: A registered Tier <tier> endpoint asked with Allow-RCNS: true is served by its registration (<rcns>) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = <enabled>
    And its [policies.rcns] sets mode = "<mode>"
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends <method> <target> with Allow-RCNS: true
    Then the response is served by its registration

    @fixture:agtp-confirm-first
    Examples:
      | tier | method | target           | rcns                  | enabled | mode          | transport          |
      | A    | LIST   | /rooms           | confirm-first         | true    | confirm-first | TLS 1.3            |
      | B    | QUOTE  | /tariff          | confirm-first         | true    | confirm-first | plaintext loopback |

    @fixture:agtp-optimistic
    Examples:
      | tier | method | target           | rcns                  | enabled | mode          | transport          |
      | A    | CREATE | /room?id={room2} | optimistic            | true    | optimistic    | plaintext loopback |
      | B    | QUOTE  | /tariff          | optimistic            | true    | optimistic    | TLS 1.3            |

    @fixture:agtp-rcns-disabled
    Examples:
      | tier | method | target           | rcns                  | enabled | mode          | transport          |
      | A    | LIST   | /rooms           | RCNS disabled         | false   | confirm-first | plaintext loopback |
      | B    | QUOTE  | /tariff          | RCNS disabled         | false   | confirm-first | TLS 1.3            |
