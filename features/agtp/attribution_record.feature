# agtp-rcns.txt, "Attribution-Record Extension Fields"; the record is the
# Attribution-Record header's compact JWS (agtp-wire-notes.md 4).
Feature: Attribution-Record extension fields
  Every action served under a synthesized contract carries synthesis_id,
  contract_hash and negotiation_origin in its Attribution-Record; Tier A
  and Tier B invocations omit all three.

  @req:agtp.rcns.attribution.fields-under-contract @profile:agtp-rcns
  Scenario Outline: Actions under a contract carry the extension fields [<mode>, <transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets mode = "<mode>"
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" holds an active contract for BOOK /room/{room}
    Then the Attribution-Record carries the contract's synthesis_id, a contract_hash and negotiation_origin "rcns-gate"
    When "alice" sends BOOK /room/{room} presenting the contract
    Then the Attribution-Record carries the contract's synthesis_id, a contract_hash and negotiation_origin "rcns-gate"
    When "alice" sends BOOK /room/{room} without Allow-RCNS
    Then the Attribution-Record carries the contract's synthesis_id, a contract_hash and negotiation_origin "rcns-gate"

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

  @req:agtp.rcns.attribution.hash-format-stable @profile:agtp-rcns
  Scenario Outline: contract_hash is 64 lowercase hex and stable across invocations [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets mode = "confirm-first"
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends BOOK /room/{room} with Allow-RCNS: true
    Then the response status is 461
    When "alice" accepts the preview
    And "alice" sends BOOK /room/{room} presenting the contract 3 times
    Then every contract_hash seen is 64 lowercase hex, the same each time, and equal to the previewed one

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.attribution.absent-tier-ab @profile:agtp-rcns
  Scenario Outline: Tier A and Tier B invocations omit the extension fields [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And "alice" holds an active contract for BOOK /room/{room}
    When "alice" sends LIST /rooms
    Then the response status is 200
    And the Attribution-Record carries none of synthesis_id, contract_hash, negotiation_origin
    When "alice" sends QUOTE /tariff
    Then the response status is 200
    And the Attribution-Record carries none of synthesis_id, contract_hash, negotiation_origin
    When "alice" sends CREATE /room?id={room2}
    Then the response status is 200
    And the Attribution-Record carries none of synthesis_id, contract_hash, negotiation_origin
    And the room record {room2} exists

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.propose.attribution.origin-propose @profile:agtp-rcns
  Scenario Outline: An action under a PROPOSE-spawned contract says negotiation_origin propose [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" proposes BOOK /room/{room}
    Then the response status is 263
    When "alice" sends BOOK /room/{room} presenting the contract
    Then the Attribution-Record carries the contract's synthesis_id, a contract_hash and negotiation_origin "propose"

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |
