# openwop-rfc-0242.md §B "Where a runless negotiation is recorded" (B.2-B.4),
# with §A.2's inbound leg, and the falsifiability rows "A.2 requested set,
# inbound", "B.2 runless home", "B.3 listed when inbound is served" and
# "B.4 unauthenticated exchange recorded" (its delivery half, and the version
# an anonymous caller is given, which is on the wire).
@fixture:openwop-tenants
Feature: An inbound negotiation is a durable host event of the caller's tenant
  A negotiation made before any run exists (a peer fetching the host's agent
  card, an MCP client's initialize) is recorded as a durable
  negotiation.decided host event. It carries no runId, belongs to the
  caller's tenant and named workspace, and reaches no other tenant. A host
  that serves either protocol inbound lists the type in its discovery
  document.

  Background:
    Given an OpenWOP host that speaks A2A versions "0.3, 1.0" with floor "0.3" and preferred "1.0"
    And that speaks MCP revisions "2025-03-26, 2025-06-18, 2025-11-25" with floor "2025-03-26" and preferred "2025-11-25"
    And the OpenWOP host has tenants "acme" and "globex"

  @req:openwop.requirement.0242.inbound.listed @profile:openwop-rfc0242
  Scenario: A host that serves A2A or MCP inbound lists negotiation.decided as a durable host-event type
    When the suite reads the host's discovery document
    Then the response status is 200
    And the host advertises an inbound A2A or MCP facet, each naming an http(s) URL
    And its hostEvents.types lists "negotiation.decided" with delivery "durable"

  @req:openwop.requirement.0242.inbound.recorded @profile:openwop-rfc0242
  Scenario Outline: An authenticated inbound A2A negotiation is recorded on the caller's tenant's stream, naming what was asked for
    Given the host serves A2A inbound
    When tenant "<tenant>" <asks> naming A2A version "<ask>"
    Then the host answers in A2A version "<ask>"
    And tenant "<tenant>"'s host-event stream delivers exactly one negotiation.decided record of that exchange
    And that record's envelope satisfies the schema "openwop/host-event.envelope.json"
    And that record's payload satisfies the schema "openwop/negotiation-decided.payload.json"
    And that record is a durable host event of the caller's workspace, with no runId
    And that record is accepted at "<ask>" with requested "<ask>"
    And tenant "<other>"'s host-event stream does not deliver that record

    Examples:
      | tenant | other  | asks                                                             | ask |
      | acme   | globex | fetches the host's agent card                                    | 1.0 |
      | acme   | globex | fetches the host's agent card                                    | 0.3 |
      | globex | acme   | sends a JSON-RPC message to the A2A endpoint the host advertises | 1.0 |
      | acme   | globex | sends a JSON-RPC message to the A2A endpoint the host advertises | 0.3 |

  @req:openwop.requirement.0242.inbound.refused @profile:openwop-rfc0242
  Scenario Outline: A refused inbound A2A negotiation is recorded too
    Given the host serves A2A inbound
    When tenant "<tenant>" <asks> naming A2A version "0.2"
    Then the host refuses the A2A exchange
    And tenant "<tenant>"'s host-event stream delivers exactly one negotiation.decided record of that exchange
    And that record's envelope satisfies the schema "openwop/host-event.envelope.json"
    And that record's payload satisfies the schema "openwop/negotiation-decided.payload.json"
    And that record is a durable host event of the caller's workspace, with no runId
    And that record is refused below the floor "0.3" with requested "0.2"
    And tenant "<other>"'s host-event stream does not deliver that record

    Examples:
      | tenant | other  | asks                                                             |
      | acme   | globex | fetches the host's agent card                                    |
      | globex | acme   | sends a JSON-RPC message to the A2A endpoint the host advertises |

  @req:openwop.requirement.0242.inbound.recorded.mcp @profile:openwop-rfc0242
  Scenario Outline: An authenticated MCP initialize is recorded on the caller's tenant's stream, naming what was asked for
    Given the host serves MCP inbound
    When tenant "<tenant>" initializes an MCP session with the host naming revision "<ask>"
    Then the host answers in MCP revision "<ask>"
    And tenant "<tenant>"'s host-event stream delivers exactly one negotiation.decided record of that exchange
    And that record's envelope satisfies the schema "openwop/host-event.envelope.json"
    And that record's payload satisfies the schema "openwop/negotiation-decided.payload.json"
    And that record is a durable host event of the caller's workspace, with no runId
    And that record is accepted at "<ask>" with requested "<ask>"
    And tenant "<other>"'s host-event stream does not deliver that record

    Examples:
      | tenant | other  | ask        |
      | globex | acme   | 2025-11-25 |
      | acme   | globex | 2025-03-26 |

  @req:openwop.requirement.0242.inbound.recorded.mcp @profile:openwop-rfc0242
  Scenario Outline: The revision an MCP client asked for is initialize's protocolVersion, whatever its MCP-Protocol-Version header says
    Given the host serves MCP inbound
    When tenant "<tenant>" initializes an MCP session naming revision "<ask>" in protocolVersion, with the MCP-Protocol-Version header "<header>"
    Then the host answers in MCP revision "<ask>"
    And tenant "<tenant>"'s host-event stream delivers exactly one negotiation.decided record of that exchange
    And that record's payload satisfies the schema "openwop/negotiation-decided.payload.json"
    And that record is accepted at "<ask>" with requested "<ask>"

    Examples:
      | tenant | ask        | header     |
      | acme   | 2025-06-18 | 2025-11-25 |
      | globex | 2025-11-25 | 2025-03-26 |
      | acme   | 2025-03-26 | 2024-11-05 |

  @req:openwop.requirement.0242.inbound.refused.mcp @profile:openwop-rfc0242
  Scenario Outline: A refused MCP initialize is recorded too, naming what protocolVersion asked for
    Given the host serves MCP inbound
    When tenant "<tenant>" initializes an MCP session naming revision "2024-11-05" in protocolVersion, with the MCP-Protocol-Version header "<header>"
    Then the host refuses the MCP exchange
    And tenant "<tenant>"'s host-event stream delivers exactly one negotiation.decided record of that exchange
    And that record's envelope satisfies the schema "openwop/host-event.envelope.json"
    And that record's payload satisfies the schema "openwop/negotiation-decided.payload.json"
    And that record is a durable host event of the caller's workspace, with no runId
    And that record is refused below the floor "2025-03-26" with requested "2024-11-05"
    And tenant "<other>"'s host-event stream does not deliver that record

    Examples:
      | tenant | other  | header     |
      | globex | acme   | 2025-11-25 |
      | acme   | globex | 2025-03-26 |

  @req:openwop.requirement.0242.inbound.refused.mcp @profile:openwop-rfc0242
  Scenario: A refused MCP initialize is recorded too
    Given the host serves MCP inbound
    When tenant "globex" initializes an MCP session with the host naming revision "2024-11-05"
    Then the host refuses the MCP exchange
    And tenant "globex"'s host-event stream delivers exactly one negotiation.decided record of that exchange
    And that record's envelope satisfies the schema "openwop/host-event.envelope.json"
    And that record's payload satisfies the schema "openwop/negotiation-decided.payload.json"
    And that record is a durable host event of the caller's workspace, with no runId
    And that record is refused below the floor "2025-03-26" with requested "2024-11-05"
    And tenant "acme"'s host-event stream does not deliver that record

  # B.4: an exchange with no authenticated caller. That the host records it
  # has no outside observable; what reaches the wire is witnessed: the
  # version it is given, and that its record reaches no tenant.

  @req:openwop.rfc0242.unauthenticated.never-below-preferred @profile:openwop-rfc0242
  Scenario Outline: An anonymous A2A caller is never given a version below the preferred one
    Given the host serves A2A inbound
    When an anonymous caller <asks> naming A2A version "<ask>"
    Then the host refuses the exchange or answers in a version not below its preferred A2A version

    Examples:
      | asks                                                             | ask |
      | fetches the host's agent card                                    | 0.2 |
      | fetches the host's agent card                                    | 0.3 |
      | fetches the host's agent card                                    | 0.5 |
      | fetches the host's agent card                                    | 1.0 |
      | fetches the host's agent card                                    | 2.0 |
      | fetches the host's agent card                                    |     |
      | sends a JSON-RPC message to the A2A endpoint the host advertises | 0.3 |
      | sends a JSON-RPC message to the A2A endpoint the host advertises | 2.0 |

  @req:openwop.rfc0242.unauthenticated.never-below-preferred @profile:openwop-rfc0242
  Scenario Outline: An anonymous MCP client is never given a revision below the preferred one
    Given the host serves MCP inbound
    When an anonymous caller initializes an MCP session with the host naming revision "<ask>"
    Then the host refuses the exchange or answers in a version not below its preferred MCP revision

    Examples:
      | ask        |
      | 2024-11-05 |
      | 2025-03-26 |
      | 2025-05-01 |
      | 2025-06-18 |
      | 2025-11-25 |
      | 2026-01-01 |

  @req:openwop.rfc0242.unauthenticated.recorded-undelivered @profile:openwop-rfc0242 @exclusive
  Scenario: Anonymous A2A exchanges' records reach no tenant's stream
    Given the scenario has the host to itself
    And the host serves A2A inbound
    When an anonymous caller fetches the host's agent card naming A2A version "1.0"
    And an anonymous caller fetches the host's agent card naming A2A version "0.5"
    And an anonymous caller sends a JSON-RPC message to the A2A endpoint the host advertises naming A2A version "2.0"
    Then no configured tenant's host-event stream delivers a record of an exchange that tenant did not make

  @req:openwop.rfc0242.unauthenticated.recorded-undelivered @profile:openwop-rfc0242 @exclusive
  Scenario: Anonymous MCP initializes' records reach no tenant's stream
    Given the scenario has the host to itself
    And the host serves MCP inbound
    When an anonymous caller initializes an MCP session with the host naming revision "2025-11-25"
    And an anonymous caller initializes an MCP session with the host naming revision "2024-11-05"
    Then no configured tenant's host-event stream delivers a record of an exchange that tenant did not make
