# agtp-rcns.txt, "Headers and Rate Limiting": the per-agent RCNS rate limit
# on gate evaluations and the (Agent-ID, Idempotency-Key) cache.
Feature: Headers and rate limiting
  Gate evaluations are rate limited per agent, 10 a minute unless the
  operator says otherwise, answered 429 with scope rcns; invocations under
  an issued contract are outside that limit. Idempotent replays are cached
  per agent.

  @req:agtp.rcns.rate.gate-429-scope-rcns @profile:agtp-rcns
  Scenario Outline: Past the ceiling a gate evaluation is 429 with scope rcns [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets rate_limit_per_minute = 2
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends 2 gate requests for fresh rooms
    And "alice" sends BOOK /room/{fresh} with Allow-RCNS: true
    Then the response status is 429
    And the response body carries scope rcns

    @fixture:agtp-gate-strict
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.rate.per-agent @profile:agtp-rcns
  Scenario Outline: One agent at its ceiling does not limit another [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets rate_limit_per_minute = 2
    And its [policies.rcns] sets mode = "confirm-first"
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "bob" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And "alice" has reached its RCNS gate ceiling
    When "bob" sends BOOK /room/{fresh} with Allow-RCNS: true
    Then the response status is 461

    @fixture:agtp-gate-strict
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.rate.default-ten @profile:agtp-rcns
  Scenario Outline: With no ceiling configured the eleventh evaluation in a minute is 429 [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] leaves rate_limit_per_minute unset
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends 10 gate requests for fresh rooms
    And "alice" sends BOOK /room/{fresh} with Allow-RCNS: true
    Then the response status is 429

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.rate.contract-invocations-exempt @profile:agtp-rcns
  Scenario Outline: Contract invocations are served while the agent is at its gate ceiling [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets rate_limit_per_minute = 2
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And "alice" holds an active contract for BOOK /room/{room} remembered as "held"
    And "alice" has reached its RCNS gate ceiling
    When "alice" sends BOOK /room/{room} presenting contract "held" 4 times
    Then each of them is served under contract "held"

    @fixture:agtp-gate-strict
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  # Witnessed directly, not through the ceiling setup: the agent spent one
  # gate evaluation obtaining its contract, then invokes it more times than
  # its whole ceiling. Its next gate request must still be evaluated: a host
  # that serves the invocations but counts them against the gate budget
  # answers it 429.
  @req:agtp.rcns.rate.contract-invocations-exempt @profile:agtp-rcns
  Scenario Outline: Contract invocations leave the agent's gate budget untouched (<mode>) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets mode = "<mode>"
    And <ceiling>
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And "alice" holds an active contract for BOOK /room/{room} remembered as "held"
    When "alice" sends BOOK /room/{room} presenting contract "held" <times> times
    Then each of them is served under contract "held"
    When "alice" sends BOOK /room/{fresh} with Allow-RCNS: true
    Then the response status is not 429

    @fixture:agtp-gate-strict
    Examples:
      | mode          | ceiling                                                 | times | transport          |
      | confirm-first | its [policies.rcns] sets rate_limit_per_minute = 2      | 3     | TLS 1.3            |
      | confirm-first | its [policies.rcns] sets rate_limit_per_minute = 2      | 5     | plaintext loopback |

    @fixture:agtp-optimistic
    Examples:
      | mode          | ceiling                                                 | times | transport          |
      | optimistic    | its [policies.rcns] leaves rate_limit_per_minute unset  | 10    | plaintext loopback |
      | optimistic    | its [policies.rcns] leaves rate_limit_per_minute unset  | 12    | TLS 1.3            |

  @req:agtp.rcns.idempotency.same-agent-replay @profile:agtp-rcns
  Scenario Outline: The same agent replaying a key gets the cached response [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets mode = "optimistic"
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends BOOK /room/{room} with Allow-RCNS: true with Idempotency-Key "k1"
    Then the request succeeded
    When "alice" sends BOOK /room/{room} with Allow-RCNS: true with Idempotency-Key "k1"
    Then the response is a replay of "alice"'s first response to Idempotency-Key "k1"

    @fixture:agtp-optimistic
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.idempotency.cross-agent-independent @profile:agtp-rcns
  Scenario Outline: Another agent using the same key is an independent request [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets mode = "optimistic"
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "bob" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends BOOK /room/{room} with Allow-RCNS: true with Idempotency-Key "k1"
    Then the request succeeded
    When "bob" sends BOOK /room/{room} with Allow-RCNS: true with Idempotency-Key "k1"
    Then the request succeeded
    And the response is not "alice"'s response to Idempotency-Key "k1"

    @fixture:agtp-optimistic
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |
