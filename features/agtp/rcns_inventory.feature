# agtp-rcns.txt, introduction (the DISCOVER /patterns, DISCOVER /contracts,
# INSPECT target=contract and INSPECT target=rcns-attempt inventory
# surfaces), "Tier C Resolution" (the fields INSPECT target=contract shows)
# and agtp-wire-notes.md 4 (RCNS-Attempt-Id). Floor methods go to target /
# with their parameters in the request envelope.
Feature: The RCNS inventory
  Agents and operators can list what the server can synthesize and which
  contracts exist, inspect one contract, and read back a gate evaluation.

  @req:agtp.inventory.patterns @profile:agtp-rcns
  Scenario Outline: DISCOVER /patterns lists the recipes with their current version [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" discovers the synthesis patterns
    Then the patterns include recipe "room-booking" version "1" for BOOK /room/{id}
    And the AGTP body satisfies the schema "agtp/patterns.json"

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.inventory.contracts-own @profile:agtp-rcns
  Scenario Outline: DISCOVER /contracts lists the caller's own contracts only [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "bob" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And "alice" holds an active contract for BOOK /room/{room} remembered as "mine"
    And "bob" holds an active contract for BOOK /room/{room2} remembered as "theirs"
    When "alice" lists its contracts
    Then the listing includes contract "mine"
    And the listing omits contract "theirs"
    And the AGTP body satisfies the schema "agtp/contracts.json"

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.inventory.contracts-inspect-all @profile:agtp-rcns
  Scenario Outline: With inspect:all DISCOVER /contracts lists every agent's contracts [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "bob" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "ops" has trust tier 1 and is granted "inspect:all"
    And "alice" holds an active contract for BOOK /room/{room} remembered as "mine"
    And "bob" holds an active contract for BOOK /room/{room2} remembered as "theirs"
    When "ops" lists its contracts
    Then the listing includes contract "mine"
    And the listing includes contract "theirs"
    And the AGTP body satisfies the schema "agtp/contracts.json"

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.inventory.inspect-contract-fields @profile:agtp-rcns
  Scenario Outline: INSPECT target=contract shows the contract's resolver fields (<how>) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And <obtained>
    When "alice" inspects contract "mine"
    Then the response describes contract "mine" for BOOK /room/{room} under recipe "room-booking" version "1"
    And the AGTP body satisfies the schema "agtp/contract.json"

    @fixture:agtp-confirm-first
    Examples:
      | how         | obtained                                                                    | transport          |
      | via gate    | "alice" holds an active contract for BOOK /room/{room} remembered as "mine" | TLS 1.3            |
      | via gate    | "alice" holds an active contract for BOOK /room/{room} remembered as "mine" | plaintext loopback |
      | via PROPOSE | "alice" proposes BOOK /room/{room} remembered as "mine"                     | TLS 1.3            |
      | via PROPOSE | "alice" proposes BOOK /room/{room} remembered as "mine"                     | plaintext loopback |

  @req:agtp.inventory.inspect-contract-not-yours @profile:agtp-rcns
  Scenario Outline: INSPECT target=contract of another agent's contract reveals nothing [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "bob" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And "alice" holds an active contract for BOOK /room/{room} remembered as "mine"
    When "bob" inspects contract "mine"
    Then the response reveals nothing of contract "mine"

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.inventory.inspect-contract-not-found @profile:agtp-rcns
  Scenario Outline: INSPECT target=contract of a synthesis_id never issued answers 404 [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And "alice" holds an active contract for BOOK /room/{room}
    When "alice" inspects an unknown synthesis_id
    Then the response status is 404
    And "alice" can inspect the contract

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.inventory.inspect-rcns-attempt @profile:agtp-rcns
  Scenario Outline: INSPECT target=rcns-attempt reads back a refused gate evaluation (<reason>) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = <enabled>
    And its [policies.rcns] sets min_trust_tier = 2
    And agent "alice" has trust tier 3 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends BOOK /room/{room} with Allow-RCNS: true
    Then the answer is the <lock> lock's refusal
    When "alice" inspects the RCNS attempt of that answer
    Then the attempt record names status 464, reason <reason> and BOOK /room/{room}

    @fixture:agtp-gate-strict
    Examples:
      | enabled | lock          | reason                  | transport          |
      | true    | trust tier    | trust-tier-insufficient | TLS 1.3            |
      | true    | trust tier    | trust-tier-insufficient | plaintext loopback |

    @fixture:agtp-rcns-disabled
    Examples:
      | enabled | lock          | reason                  | transport          |
      | false   | server policy | rcns-disabled           | TLS 1.3            |
      | false   | server policy | rcns-disabled           | plaintext loopback |

  @req:agtp.inventory.inspect-rcns-attempt @profile:agtp-rcns
  Scenario Outline: INSPECT target=rcns-attempt reads back a 464 for the pair (<case>) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends BOOK <path> with Allow-RCNS: true
    Then the response <refusal>
    When "alice" inspects the RCNS attempt of that answer
    Then the attempt record names status 464, the reason it was answered and BOOK <path>

    @fixture:agtp-confirm-first
    Examples:
      | case              | path         | refusal                                          | transport          |
      | nothing composes  | /desk/{desk} | status is 464 with reason composition-impossible | TLS 1.3            |
      | nothing composes  | /desk/{desk} | status is 464 with reason composition-impossible | plaintext loopback |
      | composition fails | /hall/{hall} | is 464 for a composition that failed             | TLS 1.3            |
      | composition fails | /hall/{hall} | is 464 for a composition that failed             | plaintext loopback |

  @req:agtp.inventory.inspect-rcns-attempt @profile:agtp-rcns
  Scenario Outline: INSPECT target=rcns-attempt reads back another agent's refused presentation [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "bob" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And "alice" holds an active contract for BOOK /room/{room}
    When "bob" sends BOOK /room/{room} presenting the contract
    Then the response status is 464 with reason contract-not-yours
    When "bob" inspects the RCNS attempt of that answer
    Then the attempt record names status 464, reason contract-not-yours and BOOK /room/{room}

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.inventory.inspect-rcns-attempt @profile:agtp-rcns
  Scenario Outline: INSPECT target=rcns-attempt reads back a revoked contract presented again [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "ops" has trust tier 1 and is granted "inspect:all"
    And "alice" holds an active contract for BOOK /room/{room}
    When "ops" sends REVOKE target=contract synthesis_id=the contract
    And "alice" sends BOOK /room/{room} presenting the contract
    Then the response status is 464 with reason contract-revoked
    When "alice" inspects the RCNS attempt of that answer
    Then the attempt record names status 464, reason contract-revoked and BOOK /room/{room}

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |
