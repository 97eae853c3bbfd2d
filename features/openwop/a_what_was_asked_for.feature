# openwop-rfc-0242.md §A "What was asked for" (A.1-A.3) and its falsifiability
# rows "A.2 requested set, outbound" and "A.3 a downgrade reads as one".
# Outbound negotiations are driven through the sample invoke seams against a
# fake peer the suite runs; the record is read back from the run's log.
@fixture:openwop-tenants
Feature: A negotiation record names the version that was asked for
  Whenever the requesting side named a version, the negotiation.decided
  record carries it as requested, so that a reader of the log can tell a
  request that was met from one that was downgraded. A downgrade is an
  accepted record whose version differs from requested.

  Background:
    Given an OpenWOP host that speaks A2A versions "0.3, 1.0" with floor "0.3" and preferred "1.0"
    And that speaks MCP revisions "2025-03-26, 2025-06-18, 2025-11-25" with floor "2025-03-26" and preferred "2025-11-25"
    And the OpenWOP host has tenants "acme" and "globex"

  @req:openwop.requirement.0242.requested.outbound @profile:openwop-rfc0242
  Scenario Outline: An outbound A2A negotiation records the version the host asked the peer for
    Given the outbound negotiation seams are enabled
    And a fake A2A peer that <peer>
    When tenant "acme" has the host negotiate A2A with that peer asking for "<ask>"
    Then the peer was asked for "<ask>"
    And the run's log holds exactly one negotiation.decided record
    And that record's payload satisfies the schema "openwop/negotiation-decided.payload.json"
    And that record's requested is the version the peer was asked for
    And that record is <outcome>
    And that record identifies the peer only by the digest of its origin

    Examples:
      | peer                                       | ask | outcome                                   |
      | speaks "0.3, 1.0"                          | 1.0 | accepted at the version the peer answered |
      | speaks "0.3, 1.0"                          | 0.3 | accepted at the version the peer answered |
      | speaks "0.3"                               | 1.0 | accepted at the version the peer answered |
      | speaks "0.2"                               | 1.0 | refused, with no version                  |
      | speaks "0.3" and refuses any other version | 1.0 | refused, with no version                  |

  @req:openwop.requirement.0242.requested.outbound @profile:openwop-rfc0242
  Scenario: When the host picks the version itself, the record names the one it asked for
    Given the outbound negotiation seams are enabled
    And a fake A2A peer that speaks "0.3, 1.0"
    When tenant "acme" has the host negotiate A2A with that peer without naming a version
    Then the peer was asked for a version
    And the run's log holds exactly one negotiation.decided record
    And that record's requested is the version the peer was asked for

  @req:openwop.requirement.0242.requested.outbound.mcp @profile:openwop-rfc0242
  Scenario Outline: An outbound MCP initialize records the revision the host asked the server for
    Given the outbound negotiation seams are enabled
    And a fake MCP peer that <peer>
    When tenant "acme" has the host negotiate MCP with that peer asking for "<ask>"
    Then the peer was asked for "<ask>"
    And the run's log holds exactly one negotiation.decided record
    And that record's payload satisfies the schema "openwop/negotiation-decided.payload.json"
    And that record's requested is the version the peer was asked for
    And that record is <outcome>
    And that record identifies the peer only by the digest of its origin

    Examples:
      | peer                                              | ask        | outcome                                   |
      | speaks "2025-11-25"                               | 2025-11-25 | accepted at the version the peer answered |
      | speaks "2025-06-18, 2025-11-25"                   | 2025-06-18 | accepted at the version the peer answered |
      | speaks "2025-03-26"                               | 2025-11-25 | accepted at the version the peer answered |
      | speaks "2024-11-05"                               | 2025-11-25 | refused, with no version                  |
      | speaks "2025-03-26" and refuses any other version | 2025-11-25 | refused, with no version                  |

  @req:openwop.requirement.0242.requested.outbound.mcp @profile:openwop-rfc0242
  Scenario: When the host picks the revision itself, the record names the one it asked for
    Given the outbound negotiation seams are enabled
    And a fake MCP peer that speaks "2025-06-18, 2025-11-25"
    When tenant "acme" has the host negotiate MCP with that peer without naming a version
    Then the peer was asked for a version
    And the run's log holds exactly one negotiation.decided record
    And that record's requested is the version the peer was asked for

  @req:openwop.rfc0242.downgrade.reads-as-accepted @profile:openwop-rfc0242
  Scenario Outline: An outbound downgrade reads as an accepted record whose version differs from requested
    Given the outbound negotiation seams are enabled
    And a fake <protocol> peer that speaks "<peer speaks>"
    When tenant "acme" has the host negotiate <protocol> with that peer asking for "<ask>"
    Then the host reports the negotiated version "<agreed>"
    And the run's log holds exactly one negotiation.decided record
    And that record's payload satisfies the schema "openwop/negotiation-decided.payload.json"
    And that record is a downgrade from "<ask>" to "<agreed>"

    Examples:
      | protocol | peer speaks | ask        | agreed     |
      | A2A      | 0.3         | 1.0        | 0.3        |
      | MCP      | 2025-03-26  | 2025-11-25 | 2025-03-26 |
      | MCP      | 2025-06-18  | 2025-11-25 | 2025-06-18 |

  @req:openwop.rfc0242.downgrade.reads-as-accepted @profile:openwop-rfc0242
  Scenario Outline: An inbound A2A downgrade reads as an accepted record whose version differs from requested
    Given the host serves A2A inbound
    When tenant "acme" <asks> naming A2A version "<ask>"
    Then the host answers in A2A version "<agreed>"
    And tenant "acme"'s host-event stream delivers exactly one negotiation.decided record of that exchange
    And that record's envelope satisfies the schema "openwop/host-event.envelope.json"
    And that record is a downgrade from "<ask>" to "<agreed>"

    Examples:
      | asks                                                             | ask | agreed |
      | fetches the host's agent card                                    | 0.5 | 0.3    |
      | fetches the host's agent card                                    | 2.0 | 1.0    |
      | sends a JSON-RPC message to the A2A endpoint the host advertises | 0.5 | 0.3    |

  @req:openwop.rfc0242.downgrade.reads-as-accepted @profile:openwop-rfc0242
  Scenario Outline: An inbound MCP downgrade reads as an accepted record whose version differs from requested
    Given the host serves MCP inbound
    When tenant "acme" initializes an MCP session with the host naming revision "<ask>"
    Then the host answers in MCP revision "<agreed>"
    And tenant "acme"'s host-event stream delivers exactly one negotiation.decided record of that exchange
    And that record's envelope satisfies the schema "openwop/host-event.envelope.json"
    And that record is a downgrade from "<ask>" to "<agreed>"

    Examples:
      | ask        | agreed     |
      | 2025-05-01 | 2025-03-26 |
      | 2026-01-01 | 2025-11-25 |

  # The RFC's Compatibility section: requested is optional, and records made
  # before it existed stay valid on replay and poll. No exchange on the wire
  # makes such a record today, so the host imports one through its
  # legacy-record seam, as an upgrade would find it; the host must then read
  # it as written (not refuse, drop or rewrite it) and read on past it.
  @req:openwop.rfc0242.compatibility.record-without-requested-read @profile:openwop-rfc0242
  Scenario Outline: A host event written before requested existed is replayed as written (<outcome> <protocol>, <how>)
    Given the host serves <protocol> inbound
    When tenant "<tenant>" makes 1 accepted inbound <protocol> exchange
    And the host holds tenant "<tenant>"'s <outcome> <protocol> record written before requested existed, as a host event
    And <subscribes>
    Then that stream delivers the legacy record as it was written, without requested, before the record of an exchange tenant "<tenant>" makes after it opened

    Examples:
      | tenant | outcome  | protocol | how                        | subscribes                                                                       |
      | acme   | accepted | A2A      | new subscription           | tenant "acme" opens a new host-event stream without Last-Event-ID                |
      | globex | refused  | MCP      | new subscription           | tenant "globex" opens a new host-event stream without Last-Event-ID              |
      | globex | accepted | MCP      | resumed with Last-Event-ID | tenant "globex" resumes its host-event stream after the record of its exchange 1 |
      | acme   | refused  | A2A      | resumed with Last-Event-ID | tenant "acme" resumes its host-event stream after the record of its exchange 1   |

  @req:openwop.rfc0242.compatibility.record-without-requested-read @profile:openwop-rfc0242
  Scenario Outline: A run's record written before requested existed is polled as written (<outcome> <protocol>)
    Given the host holds tenant "<tenant>"'s <outcome> <protocol> record written before requested existed, on a run's log
    When tenant "<tenant>" polls that run's log
    Then the log delivers the legacy record as it was written, without requested

    Examples:
      | tenant | outcome  | protocol |
      | acme   | accepted | A2A      |
      | globex | refused  | MCP      |
