# openwop-rfc-0242.md §B.2 "Any other negotiation is recorded as a durable
# host event" (RFC 0236 host events), with §D, whose inbound scenario reads
# /host/events after the exchange; and the falsifiability row "B.2 runless
# home". What durable promises a subscriber is decided in
# docs/interpretations.md ("The durable host-event stream").
@fixture:openwop-tenants
Feature: A durable host event is kept: it survives a restart, a new subscription replays it, a resumed one continues after it
  A runless negotiation record is a durable host event. A subscriber that
  was not listening when it was recorded still receives it; one that
  reconnects naming the last eventId it had (Last-Event-ID) receives what
  came after, once each, and nothing of another tenant's; and all of it
  holds when the host was restarted, or crashed, in between.

  Background:
    Given an OpenWOP host that speaks A2A versions "0.3, 1.0" with floor "0.3" and preferred "1.0"
    And that speaks MCP revisions "2025-03-26, 2025-06-18, 2025-11-25" with floor "2025-03-26" and preferred "2025-11-25"
    And the OpenWOP host has tenants "acme" and "globex"

  @req:openwop.hostevents.resume.after-last-event-id @profile:openwop-rfc0242
  Scenario Outline: A subscriber resuming with Last-Event-ID receives every later record of its tenant once, and nothing else
    Given the host serves <protocol> inbound
    When tenant "<tenant>" makes <made> accepted inbound <protocol> exchanges
    And tenant "<other>" makes 2 accepted inbound <protocol> exchanges
    And tenant "<tenant>" resumes its host-event stream after the record of its exchange <after>
    Then the resumed stream delivers every later record of tenant "<tenant>" once, in order, and nothing of another tenant's

    Examples:
      | tenant | other  | protocol | made | after |
      | acme   | globex | A2A      | 3    | 1     |
      | globex | acme   | MCP      | 3    | 2     |
      | acme   | globex | MCP      | 2    | 2     |
      | globex | acme   | A2A      | 2    | 2     |

  @req:openwop.hostevents.resume.after-last-event-id @profile:openwop-rfc0242
  Scenario Outline: Resuming with Last-Event-ID works across a restart of the host
    Given the host keeps its state where the suite can restart it
    And the host serves <protocol> inbound
    When tenant "acme" makes 3 accepted inbound <protocol> exchanges
    And tenant "globex" makes 1 accepted inbound <protocol> exchange
    And the host <stops>
    And tenant "acme" makes 1 accepted inbound <protocol> exchange
    And tenant "acme" resumes its host-event stream after the record of its exchange <after>
    Then the resumed stream delivers every later record of tenant "acme" once, in order, and nothing of another tenant's

    Examples:
      | protocol | stops                        | after |
      | A2A      | is restarted                 | 1     |
      | MCP      | crashes and is started again | 2     |
      | A2A      | crashes and is started again | 3     |

  @req:openwop.hostevents.fresh-subscription.replays @profile:openwop-rfc0242
  Scenario Outline: A new subscription without Last-Event-ID replays the tenant's records made before it opened
    Given the host serves <protocol> inbound
    When tenant "<tenant>" makes <made> accepted inbound <protocol> exchanges
    And tenant "<tenant>" opens a new host-event stream without Last-Event-ID
    Then the new stream delivers each of those records as it was first delivered, before the record of an exchange made after it opened

    Examples:
      | tenant | protocol | made |
      | acme   | A2A      | 1    |
      | globex | MCP      | 1    |
      | globex | A2A      | 3    |

  @req:openwop.requirement.0242.inbound.recorded @profile:openwop-rfc0242
  Scenario Outline: An inbound A2A record survives a restart of the host, the exchange answered just before it included
    Given the host keeps its state where the suite can restart it
    And the host serves A2A inbound
    And tenant "acme"'s new host-event streams replay its earlier A2A records
    When tenant "acme" <asks> naming A2A version "<ask>"
    And the host <stops>
    Then a new host-event stream of tenant "acme" delivers the records made before the restart, that exchange's among them
    And that record is a durable host event of the caller's workspace, with no runId
    And that record is accepted at "<ask>" with requested "<ask>"

    Examples:
      | asks                                                             | ask | stops                        |
      | fetches the host's agent card                                    | 1.0 | crashes and is started again |
      | sends a JSON-RPC message to the A2A endpoint the host advertises | 0.3 | is restarted                 |
      | fetches the host's agent card                                    | 0.3 | crashes and is started again |

  @req:openwop.requirement.0242.inbound.recorded.mcp @profile:openwop-rfc0242
  Scenario Outline: An MCP initialize's record survives a restart of the host, the one answered just before it included
    Given the host keeps its state where the suite can restart it
    And the host serves MCP inbound
    And tenant "globex"'s new host-event streams replay its earlier MCP records
    When tenant "globex" initializes an MCP session with the host naming revision "<ask>"
    And the host <stops>
    Then a new host-event stream of tenant "globex" delivers the records made before the restart, that exchange's among them
    And that record is a durable host event of the caller's workspace, with no runId
    And that record is accepted at "<ask>" with requested "<ask>"

    Examples:
      | ask        | stops                        |
      | 2025-11-25 | crashes and is started again |
      | 2025-06-18 | is restarted                 |

  # Tenant isolation on the paths a live stream does not take. A new
  # subscription replays what was recorded before it opened: another
  # tenant's records, made before it, must not be among what it replays.
  # A reconnect naming another tenant's eventId in Last-Event-ID must not
  # resume that tenant's stream (the host may refuse it, or read the id as
  # unknown). Each stream is read until the record of an exchange the
  # subscriber's tenant makes after it opened, and a little beyond.
  @req:openwop.requirement.0242.inbound.recorded @profile:openwop-rfc0242
  Scenario Outline: A new A2A subscription replays none of the records another tenant made before it opened
    Given the host serves A2A inbound
    When tenant "<tenant>" makes <own> accepted inbound A2A exchanges
    And tenant "<other>" makes <made> accepted inbound A2A exchanges
    And tenant "<tenant>" opens a new host-event stream without Last-Event-ID
    Then that stream carries no record of tenant "<other>"'s, up to and past the record of an exchange tenant "<tenant>" makes after it opened

    Examples:
      | tenant | other  | own | made |
      | acme   | globex | 1   | 2    |
      | globex | acme   | 2   | 1    |

  @req:openwop.requirement.0242.inbound.recorded.mcp @profile:openwop-rfc0242
  Scenario Outline: A new MCP subscription replays none of the records another tenant made before it opened
    Given the host serves MCP inbound
    When tenant "<tenant>" makes <own> accepted inbound MCP exchanges
    And tenant "<other>" makes <made> accepted inbound MCP exchanges
    And tenant "<tenant>" opens a new host-event stream without Last-Event-ID
    Then that stream carries no record of tenant "<other>"'s, up to and past the record of an exchange tenant "<tenant>" makes after it opened

    Examples:
      | tenant | other  | own | made |
      | globex | acme   | 1   | 3    |
      | acme   | globex | 1   | 1    |

  @req:openwop.requirement.0242.inbound.recorded @profile:openwop-rfc0242
  Scenario Outline: A reconnect naming another tenant's A2A record in Last-Event-ID delivers nothing of that tenant's
    Given the host serves A2A inbound
    When tenant "<tenant>" makes 1 accepted inbound A2A exchange
    And tenant "<other>" makes 3 accepted inbound A2A exchanges
    And tenant "<tenant>" reconnects to its host-event stream naming in Last-Event-ID the record of tenant "<other>"'s exchange <k>
    Then that stream carries no record of tenant "<other>"'s, up to and past the record of an exchange tenant "<tenant>" makes after it opened

    Examples:
      | tenant | other  | k |
      | acme   | globex | 1 |
      | globex | acme   | 2 |

  @req:openwop.requirement.0242.inbound.recorded.mcp @profile:openwop-rfc0242
  Scenario Outline: A reconnect naming another tenant's MCP record in Last-Event-ID delivers nothing of that tenant's
    Given the host serves MCP inbound
    When tenant "<tenant>" makes 1 accepted inbound MCP exchange
    And tenant "<other>" makes 3 accepted inbound MCP exchanges
    And tenant "<tenant>" reconnects to its host-event stream naming in Last-Event-ID the record of tenant "<other>"'s exchange <k>
    Then that stream carries no record of tenant "<other>"'s, up to and past the record of an exchange tenant "<tenant>" makes after it opened

    Examples:
      | tenant | other  | k |
      | globex | acme   | 1 |
      | acme   | globex | 2 |
