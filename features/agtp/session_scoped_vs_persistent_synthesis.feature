# agtp-rcns.txt, "Session-Scoped vs Persistent Synthesis". The AGTP session
# is the connection the proposal arrived on (agtp-wire-notes.md 1: the drafts
# describe a persistent session); the suite ends it by closing that
# connection. persistent: true is honoured when the operator sets
# [policies.propose] allow_persistent = true and refused otherwise.
Feature: Session-scoped and persistent synthesis
  A synthesized endpoint lives for the proposing session unless persistence
  was asked for and honoured, in which case it joins the regular catalog.

  @req:agtp.propose.session.removed-at-end @profile:agtp-rcns
  Scenario Outline: A session-scoped synthesis is removed when the session ends [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" proposes BOOK /room/{room}
    Then the response is a 263 for BOOK /room/{room}
    When "alice" sends BOOK /room/{room} without Allow-RCNS
    Then the response is served under the contract
    When the AGTP session ends
    And "alice" sends BOOK /room/{room2} without Allow-RCNS
    Then the response is the standard unregistered-pair refusal
    When "alice" sends BOOK /room/{room} without Allow-RCNS
    Then the response is the standard unregistered-pair refusal
    When "alice" sends BOOK /room/{room} presenting the contract
    Then the response is not served under the contract

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.propose.persistent.honoured-in-manifest @profile:agtp-rcns
  Scenario Outline: A persisted endpoint joins the catalog and outlives the session [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.propose] sets allow_persistent = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "bob" has trust tier 1 and is granted "rooms:*"
    When "alice" proposes BOOK /room/{room} with persistent: true
    Then the response is a 263 for BOOK /room/{room}
    When "alice" proposes BOOK /room/{room2}
    And the AGTP session ends
    And "bob" reads the manifest
    Then the manifest lists BOOK /room/{room}
    And the manifest does not list BOOK /room/{room2}
    When "bob" sends BOOK /room/{room} without Allow-RCNS
    Then the request succeeded
    And the room record {room} exists

    @fixture:agtp-optimistic
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.propose.persistent.refusal-independent @profile:agtp-rcns
  Scenario Outline: A refused persistence request still synthesizes, session-scoped [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.propose] sets allow_persistent = false
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "bob" has trust tier 1 and is granted "rooms:*"
    When "alice" proposes BOOK /room/{room} with persistent: true
    Then the response is a 263 for BOOK /room/{room}
    When the AGTP session ends
    And "bob" reads the manifest
    Then the manifest does not list BOOK /room/{room}
    When "alice" sends BOOK /room/{room} without Allow-RCNS
    Then the response is the standard unregistered-pair refusal

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |
