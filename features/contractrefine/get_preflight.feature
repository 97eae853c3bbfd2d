# contractrefine-preflight.txt, "GET /v1/preflight/{preflight_id}".
Feature: GET /v1/preflight/{preflight_id}
  A stored decision is read back from the WAL, exactly as it was issued.

  @req:contractrefine.preflight.get.returns-stored-decision @profile:contractrefine-preflight
  Scenario Outline: A stored decision is returned verbatim
    Given a ContractRefine host whose runtime.contract_refine.mode is "<mode>"
    When the agent requests a preflight <request>
    And the agent retrieves that preflight
    Then the response status is 200
    And the response is the decision that POST returned, verbatim

    @fixture:contractrefine-advisory
    Examples:
      | mode     | request                                          |
      | advisory | for a plan that satisfies every contract         |

    @fixture:contractrefine-enforce
    Examples:
      | mode     | request                                          |
      | enforce  | for a plan whose params lack provenance          |
      | enforce  | whose plan step kind differs from the capability |

  @req:contractrefine.preflight.get.returns-stored-decision @profile:contractrefine-preflight
  Scenario Outline: Each of several decisions under one session and plan hash is found by its own id
    Given a ContractRefine host in "<mode>" mode allowing at most 2 repair attempts
    When the agent requests a preflight <request>
    And the agent sends that preflight request 2 more times
    Then every decision so far has a distinct "preflight_id"
    And every decision so far is returned verbatim by GET

    @fixture:contractrefine-advisory
    Examples:
      | mode     | request                                          |
      | advisory | for a plan that satisfies every contract         |
      | advisory | whose plan step kind differs from the capability |

    @fixture:contractrefine-enforce
    Examples:
      | mode     | request                                          |
      | enforce  | for a plan whose params lack provenance          |

  @req:contractrefine.preflight.get.empty-id-400 @profile:contractrefine-preflight @fixture:contractrefine-advisory
  Scenario: An empty id segment is a bad request
    Given a ContractRefine host whose runtime.contract_refine.mode is "advisory"
    When the agent retrieves the preflight ""
    Then the response status is 400

  @req:contractrefine.preflight.get.unknown-id-404 @profile:contractrefine-preflight @fixture:contractrefine-advisory
  Scenario: An id no frame carries is not found
    Given a ContractRefine host whose runtime.contract_refine.mode is "advisory"
    When the agent retrieves an unknown preflight id
    Then the response status is 404

  @req:contractrefine.preflight.get.disabled-503 @profile:contractrefine-preflight @fixture:contractrefine-disabled
  Scenario: A disabled host refuses retrieval
    Given a ContractRefine host whose runtime.contract_refine.mode is "disabled"
    When the agent retrieves an unknown preflight id
    Then the response status is 503

  @req:contractrefine.preflight.get.emitter-unwired-503 @profile:contractrefine-preflight @fixture:contractrefine-unwired
  Scenario: A host with no telemetry emitter wired refuses retrieval
    Given a ContractRefine host in "advisory" mode with no telemetry emitter wired
    When the agent retrieves an unknown preflight id
    Then the response status is 503

  @req:contractrefine.preflight.get.wal-read-error-500 @profile:contractrefine-preflight @fixture:contractrefine-advisory
  Scenario: A WAL that cannot be read is a server error, not a miss
    Given a ContractRefine host in "advisory" mode whose WAL reads fail for the agent's decisions
    When the agent requests a preflight for a plan that satisfies every contract
    And the agent retrieves that preflight
    Then the response status is 500
    And the response carries no decision
