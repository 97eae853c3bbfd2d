# contractrefine-preflight.txt, "WAL event" (the autonomy.preflight frame and
# its attribute table) and "Audit query" (the audit_id join).
@fixture:contractrefine-advisory
Feature: The autonomy.preflight WAL frame
  Every decision is written to the WAL once, with the attributes an auditor
  needs and the full decision for verbatim reproduction.

  Background:
    Given a ContractRefine host whose runtime.contract_refine.mode is "advisory"
    And the WAL seam is enabled

  @req:contractrefine.preflight.wal.one-frame-per-decision @profile:contractrefine-preflight
  Scenario Outline: One frame per decision
    When the agent requests a preflight <request>
    Then the response status is 200
    And the WAL holds exactly one autonomy.preflight frame for that preflight

    Examples:
      | request                                          |
      | for a plan that satisfies every contract         |
      | for a plan whose params lack provenance          |
      | whose plan step kind differs from the capability |
      | without actor.session_id                         |

  @req:contractrefine.preflight.wal.one-frame-per-decision @profile:contractrefine-preflight
  Scenario Outline: A refused request writes no frame
    When the agent requests a preflight for a plan that satisfies every contract
    Then the WAL holds exactly one autonomy.preflight frame for that preflight
    When a client posts <body> to /v1/preflight
    Then the host refuses that request with a client error
    And the WAL holds no autonomy.preflight frame of that refused request

    Examples:
      | body                                        |
      | a truncated preflight request               |
      | a preflight request followed by stray bytes |

  @req:contractrefine.preflight.wal.frame-attributes @profile:contractrefine-preflight
  Scenario Outline: The frame carries the spec's attributes, typed, with the decision's values
    When the agent requests a preflight <request>
    Then the WAL frame of that preflight satisfies the schema "contractrefine/wal-frame.json"
    And the WAL frame of that preflight carries the decision's preflight_id, audit_id, outcome, reason, policy_ref and expires_at
    And the WAL frame of that preflight carries the request's plan_hash and capability
    And the WAL frame of that preflight has contract_results encoding the decision's contract_results
    And the WAL frame of that preflight has repair_hints_count equal to the number of the decision's repair hints

    Examples:
      | request                                          |
      | for a plan that satisfies every contract         |
      | for a plan whose params lack provenance          |
      | whose plan step kind differs from the capability |

  # Its own scenario, so that a frame failing the attribute schema does not
  # fail the reason-shape rule when every reason is well formed.
  @req:contractrefine.preflight.post.reason-shape @profile:contractrefine-preflight
  Scenario Outline: The frame's reason has the spec's shape
    When the agent requests a preflight <request>
    Then the WAL frame's reason has the shape "contract: <subreason>"

    Examples:
      | request                                          |
      | for a plan that satisfies every contract         |
      | for a plan whose params lack provenance          |
      | whose plan step kind differs from the capability |

  @req:contractrefine.preflight.wal.optional-attributes @profile:contractrefine-preflight
  Scenario: Optional attributes are recorded when the request sets them
    When the agent requests a passing preflight with zone "lab", environment "edge", node "node-7" and agent "agent-42"
    Then the WAL frame of that preflight has "zone" = "lab"
    And the WAL frame of that preflight has "environment" = "edge"
    And the WAL frame of that preflight has "actor_node_id" = "node-7"
    And the WAL frame of that preflight has "actor_agent_id" = "agent-42"

  @req:contractrefine.preflight.wal.decision-json-verbatim @profile:contractrefine-preflight
  Scenario Outline: decision_json is the decision POST returned and GET reproduces
    When the agent requests a preflight <request>
    Then the WAL frame's decision_json equals the decision that POST returned
    When the agent retrieves that preflight
    Then the response is the WAL frame's decision_json

    Examples:
      | request                                          |
      | for a plan that satisfies every contract         |
      | for a plan whose params lack provenance          |

  @req:contractrefine.preflight.wal.decision-survives-crash @profile:contractrefine-preflight
  Scenario Outline: Decisions answered just before a crash are in the WAL after it
    Given the host keeps its state where the suite can restart it
    When the agent requests a preflight <first>
    And the agent requests a preflight <last>
    And the host crashes and is started again
    Then every decision so far has exactly one autonomy.preflight frame in the WAL
    And every decision so far is returned verbatim by GET

    Examples:
      | first                                            | last                                             |
      | for a plan that satisfies every contract         | for a plan that satisfies every contract         |
      | whose plan step kind differs from the capability | for a plan whose params lack provenance          |
      | for a plan whose params lack provenance          | whose plan step kind differs from the capability |

  # SIGKILL keeps the kernel's page cache, so a host that writes its frame
  # and never fsyncs it passes the crash scenario; a power cut loses it.
  @req:contractrefine.preflight.wal.decision-survives-power-cut @profile:contractrefine-preflight
  Scenario Outline: Decisions answered just before a power cut are in the WAL after it
    Given the host keeps its state on a disk whose power the suite can cut
    When the agent requests a preflight <first>
    And the agent requests a preflight <last>
    And the power is cut under the host and it is started again
    Then every decision so far has exactly one autonomy.preflight frame in the WAL
    And every decision so far is returned verbatim by GET

    Examples:
      | first                                            | last                                             |
      | for a plan that satisfies every contract         | for a plan whose params lack provenance          |
      | whose plan step kind differs from the capability | for a plan that satisfies every contract         |

  @req:contractrefine.preflight.wal.decision-survives-restart @profile:contractrefine-preflight
  Scenario Outline: The WAL survives a clean restart
    Given the host keeps its state where the suite can restart it
    When the agent requests a preflight <first>
    And the agent requests a preflight <last>
    And the host is restarted
    Then every decision so far has exactly one autonomy.preflight frame in the WAL
    And every decision so far is returned verbatim by GET

    Examples:
      | first                                            | last                                             |
      | for a plan that satisfies every contract         | for a plan whose params lack provenance          |
      | whose plan step kind differs from the capability | for a plan that satisfies every contract         |

  # The audit query is the spec's CLI; the suite reads the same frames back
  # through the WAL seam, selected by the scenario's own agent.
  @req:contractrefine.preflight.wal.audit-query-chronological @profile:contractrefine-preflight
  Scenario: The audit query returns an agent's decisions in the order they were answered
    When the agent requests a preflight for a plan that satisfies every contract
    And the agent requests a preflight for a plan whose params lack provenance
    And the agent requests a preflight whose plan step kind differs from the capability
    And the agent requests a preflight for a plan that satisfies every contract
    Then the audit query for the agent's autonomy.preflight frames lists its decisions in the order they were answered
