# contractrefine-preflight.txt, "POST /v1/preflight": request body, response
# body, status codes and headers.
Feature: POST /v1/preflight
  The verifier evaluates a PreflightRequest and answers one of three
  outcomes. The endpoint fails closed when it cannot decide or cannot audit.

  @req:contractrefine.preflight.post.disabled-503 @profile:contractrefine-preflight @fixture:contractrefine-disabled
  Scenario: A disabled host refuses preflights
    Given a ContractRefine host whose runtime.contract_refine.mode is "disabled"
    When the agent requests a preflight for a plan that satisfies every contract
    Then the response status is 503
    And the response carries no decision

  @req:contractrefine.preflight.post.no-verifier-503 @profile:contractrefine-preflight @fixture:contractrefine-unwired
  Scenario Outline: A host with no contract verifier wired fails closed
    Given a ContractRefine host in "advisory" mode with no contract verifier wired
    When the agent requests a preflight <request>
    Then the response status is 503
    And the response carries no decision

    Examples:
      | request                                          |
      | for a plan that satisfies every contract         |
      | whose plan step kind differs from the capability |

  @req:contractrefine.preflight.post.outcome-closed-enum @profile:contractrefine-preflight @fixture:contractrefine-enforce
  Scenario Outline: Each top-level outcome is reachable and answered 200
    Given a ContractRefine host whose runtime.contract_refine.mode is "enforce"
    When the agent requests a preflight <request>
    Then the response status is 200
    And the response field "outcome" is "<outcome>"

    Examples:
      | request                                                | outcome         |
      | for a plan that satisfies every contract               | pass            |
      | for a plan whose params lack provenance                | repair_required |
      | whose plan step kind differs from the capability       | deny            |

  @req:contractrefine.preflight.post.decision-shape @profile:contractrefine-preflight @fixture:contractrefine-advisory
  Scenario Outline: A decision has the PreflightDecision shape
    Given a ContractRefine host whose runtime.contract_refine.mode is "advisory"
    When the agent requests a preflight <request>
    Then the response status is 200
    And the response body satisfies the schema "contractrefine/preflight-decision.json"

    Examples:
      | request                                          |
      | for a plan that satisfies every contract         |
      | for a plan whose params lack provenance          |
      | whose plan step kind differs from the capability |

  @req:contractrefine.preflight.post.no-headers-required @profile:contractrefine-preflight @fixture:contractrefine-advisory
  Scenario: A preflight sent with no headers at all is decided
    Given a ContractRefine host whose runtime.contract_refine.mode is "advisory"
    When the agent sends a passing preflight request with no request headers
    Then the response status is 200
    And the response field "outcome" is "pass"

  @req:contractrefine.preflight.post.session-metadata-missing-deny @profile:contractrefine-preflight @fixture:contractrefine-enforce
  Scenario Outline: A request without session metadata is denied
    Given a ContractRefine host whose runtime.contract_refine.mode is "enforce"
    When the agent requests a preflight without <field>
    Then the response status is 200
    And the response field "outcome" is "deny"
    And the decision's subreason is "session_metadata_missing"

    Examples:
      | field              |
      | actor.session_id   |
      | intent.plan_hash   |

  @req:contractrefine.preflight.post.repair-hints @profile:contractrefine-preflight
  Scenario Outline: A repairable plan gets repair hints
    Given a ContractRefine host whose runtime.contract_refine.mode is "<mode>"
    When the agent requests a preflight for a plan whose params lack provenance
    Then the response field "outcome" is "repair_required"
    And the decision carries at least one repair hint

    @fixture:contractrefine-advisory
    Examples:
      | mode     |
      | advisory |

    @fixture:contractrefine-enforce
    Examples:
      | mode     |
      | enforce  |

  @req:contractrefine.preflight.post.repair-attempts-bounded @profile:contractrefine-preflight @fixture:contractrefine-advisory
  Scenario Outline: The repair budget of one session and plan hash runs out, and others have their own
    Given a ContractRefine host in "advisory" mode allowing at most <max> repair attempts
    When the agent sends a repairable preflight request <max> times
    Then the last <max> answers have outcome "repair_required"
    When the agent sends that preflight request again
    Then the response status is 200
    And the response field "outcome" is not "repair_required"
    When the agent requests the same repairable preflight under another <key>
    Then the response field "outcome" is "repair_required"

    Examples:
      | max | key       |
      | 1   | session   |
      | 1   | plan hash |
      | 3   | session   |
      | 3   | plan hash |

  @req:contractrefine.preflight.post.repair-budget-survives-restart @profile:contractrefine-parley-binding @fixture:contractrefine-advisory
  Scenario Outline: A restart does not refill a spent repair budget
    Given a ContractRefine host in "advisory" mode allowing at most <max> repair attempts
    And the host keeps its state where the suite can restart it
    When the agent sends a repairable preflight request <max> times
    Then the last <max> answers have outcome "repair_required"
    When the host <how>
    And the agent sends that preflight request again
    Then the response status is 200
    And the response field "outcome" is not "repair_required"
    When the agent requests the same repairable preflight under another session
    Then the response field "outcome" is "repair_required"

    Examples:
      | max | how                          |
      | 1   | is restarted                 |
      | 2   | crashes and is started again |

  @req:contractrefine.preflight.post.malformed-body-400 @profile:contractrefine-preflight @fixture:contractrefine-advisory
  Scenario Outline: A missing or malformed body is a bad request
    Given a ContractRefine host whose runtime.contract_refine.mode is "advisory"
    When a client posts <body> to /v1/preflight
    Then the response status is 400
    And the response carries no decision

    Examples:
      | body                       |
      | no body                    |
      | an empty body              |
      | the body "{not json"       |
      | the body "[1,2"            |
      | the body "{\"intent\": }"  |
      | a truncated preflight request |
      | a preflight request followed by stray bytes |

  @req:contractrefine.preflight.post.wal-emit-failure-500 @profile:contractrefine-preflight @fixture:contractrefine-advisory
  Scenario: A decision that cannot be written to the WAL is refused
    Given a ContractRefine host in "advisory" mode whose WAL emit fails for the agent's decisions
    When the agent requests a preflight for a plan that satisfies every contract
    Then the response status is 500
    And the response carries no decision

  @req:contractrefine.preflight.post.deny-expires-at-empty @profile:contractrefine-preflight @fixture:contractrefine-enforce
  Scenario Outline: A deny issues no binding
    Given a ContractRefine host whose runtime.contract_refine.mode is "enforce"
    When the agent requests a preflight <request>
    Then the response field "outcome" is "deny"
    And the response field "execution_eligibility.expires_at" is empty
    And the response field "execution_eligibility.allowed" is "false"

    Examples:
      | request                                          |
      | whose plan step kind differs from the capability |
      | without actor.session_id                         |

  @req:contractrefine.preflight.post.pass-eligibility @profile:contractrefine-preflight @fixture:contractrefine-enforce
  Scenario: A pass is eligible for execution until it expires
    Given a ContractRefine host whose runtime.contract_refine.mode is "enforce"
    When the agent requests a preflight for a plan that satisfies every contract
    Then the response field "outcome" is "pass"
    And the response field "execution_eligibility.allowed" is "true"
    And the response field "execution_eligibility.bound_tool_kinds" lists exactly "tool.echo"
    And the response field "execution_eligibility.expires_at" is an RFC 3339 time in the future

  @req:contractrefine.preflight.post.zone-outside-policy-not-passed @profile:contractrefine-preflight
  Scenario Outline: A plan for a zone the verifier does not allow is not passed
    Given a ContractRefine host in "<mode>" mode whose verifier allows only the zones "<allowed>"
    When the agent requests, for zone "<inside>", a preflight for a plan that satisfies every contract
    Then the response status is 200
    And the response field "outcome" is "pass"
    When the agent requests, for zone "<outside>", a preflight for a plan that satisfies every contract
    Then the response status is 200
    And the response field "outcome" is not "pass"
    And the response field "execution_eligibility.allowed" is "false"
    And the response field "execution_eligibility.expires_at" is empty

    @fixture:contractrefine-advisory
    Examples:
      | mode     | allowed       | inside | outside |
      | advisory | default, lab  | lab    | edge    |

    @fixture:contractrefine-enforce
    Examples:
      | mode     | allowed       | inside | outside |
      | enforce  | default, edge | edge   | lab     |

  @req:contractrefine.preflight.post.preflight-id-uuidv4 @profile:contractrefine-preflight @fixture:contractrefine-advisory
  Scenario Outline: Server-assigned preflight ids are fresh UUIDv4s
    Given a ContractRefine host whose runtime.contract_refine.mode is "advisory"
    When the agent requests a preflight <request>
    And the agent requests a preflight for a plan that satisfies every contract
    Then the response field "preflight_id" is a UUID version 4
    And every decision so far has a distinct "preflight_id"

    Examples:
      | request                                          |
      | for a plan that satisfies every contract         |
      | whose plan step kind differs from the capability |

  @req:contractrefine.preflight.post.audit-id-uuidv4 @profile:contractrefine-preflight @fixture:contractrefine-advisory
  Scenario Outline: Server-assigned audit ids are fresh UUIDv4s
    Given a ContractRefine host whose runtime.contract_refine.mode is "advisory"
    When the agent requests a preflight <request>
    And the agent requests a preflight for a plan that satisfies every contract
    Then the response field "audit_id" is a UUID version 4
    And every decision so far has a distinct "audit_id"

    Examples:
      | request                                          |
      | for a plan that satisfies every contract         |
      | whose plan step kind differs from the capability |

  @req:contractrefine.preflight.post.reason-shape @profile:contractrefine-preflight @fixture:contractrefine-enforce
  Scenario Outline: Every reason reads "contract: <subreason>"
    Given a ContractRefine host whose runtime.contract_refine.mode is "enforce"
    When the agent requests a preflight <request>
    Then the response status is 200
    And the decision's reason has the shape "contract: <subreason>"

    Examples:
      | request                                          |
      | for a plan that satisfies every contract         |
      | for a plan whose params lack provenance          |
      | whose plan step kind differs from the capability |
      | without intent.plan_hash                         |

  @req:contractrefine.preflight.post.live-lock-fingerprint @profile:contractrefine-preflight
  Scenario Outline: The frame carries the live lock fingerprint, not the verifier's
    Given a ContractRefine host in "<mode>" mode whose live lock fingerprint is "<live>" and whose verifier was built with "<built>"
    And the WAL seam is enabled
    When the agent requests a preflight <request>
    Then the response status is 200
    And the WAL frame of that preflight has "lock_fingerprint" = "<live>"

    @fixture:contractrefine-advisory
    Examples:
      | mode     | live              | built              | request                                          |
      | advisory | blake3:1fe0live   | blake3:0ldverifier | for a plan that satisfies every contract         |
      | advisory | blake3:1fe0live   | blake3:0ldverifier | for a plan whose params lack provenance          |

    @fixture:contractrefine-enforce
    Examples:
      | mode     | live              | built              | request                                          |
      | enforce  | blake3:5ec0ndlive | blake3:5ec0ndbuilt | whose plan step kind differs from the capability |
