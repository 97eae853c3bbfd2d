# contractrefine-preflight.txt, the /v1/tool binding column of the "Mode
# ladder", the X-Autonomy-Preflight-Id header, and "Audit query".
Feature: /v1/tool binding to a prior preflight
  A tool call may name the preflight that cleared it. What a failed binding
  does depends on the mode: nothing in disabled, an audit frame in advisory,
  a denial in enforce.

  @req:contractrefine.tool.disabled-ignores-header @profile:contractrefine-tool-binding @fixture:contractrefine-disabled
  Scenario: Disabled mode ignores the header entirely
    Given a ContractRefine host whose runtime.contract_refine.mode is "disabled"
    And its tool.deliver delivers to a destination the suite runs
    And the WAL seam is enabled
    When the agent calls tool "tool.deliver" bound to an unknown preflight id
    Then the response status is 200
    And the tool ran with the plan's params
    And no WAL frame refers to that preflight id

  @req:contractrefine.tool.advisory-binding-failure-deny-frame @profile:contractrefine-tool-binding @fixture:contractrefine-advisory
  Scenario Outline: Advisory mode records a failed binding as a deny frame
    Given a ContractRefine host whose runtime.contract_refine.mode is "advisory"
    And the WAL seam is enabled
    When the agent requests a preflight <request>
    And the agent calls tool "<tool>" bound to that preflight
    Then the WAL holds an autonomy.decision frame with outcome "deny" carrying that preflight's audit_id

    Examples:
      | request                                          | tool       |
      | whose plan step kind differs from the capability | tool.echo  |
      | for a plan that satisfies every contract         | tool.write |

  @req:contractrefine.tool.advisory-binding-failure-deny-frame @profile:contractrefine-tool-binding @fixture:contractrefine-advisory
  Scenario Outline: Advisory mode records every kind of binding failure as a deny frame
    Given a ContractRefine host in "advisory" mode whose policy bundle requires preflight for "tool.deliver"
    And its tool.deliver delivers to a destination the suite runs
    And the WAL seam is enabled
    When the agent requests a preflight <request>
    And the agent calls tool "tool.deliver" <binding>
    Then the WAL holds a deny autonomy.decision frame for that call

    Examples:
      | failure                  | request                                          | binding                          |
      | unknown preflight id     | for a plan that delivers                         | bound to an unknown preflight id |
      | a deny                   | whose plan step kind differs from the capability | bound to that preflight          |
      | a repair_required        | for a plan whose params lack provenance          | bound to that preflight          |
      | a pass for another kind  | for a plan that satisfies every contract         | bound to that preflight          |

  # The ladder lists required preflight under enforce; recording its absence
  # in advisory is parley's choice (contractrefine-parley-binding).
  @req:contractrefine.tool.advisory-required-preflight-deny-frame @profile:contractrefine-parley-binding @fixture:contractrefine-advisory
  Scenario: Advisory mode records a call missing a required preflight as a deny frame
    Given a ContractRefine host in "advisory" mode whose policy bundle requires preflight for "tool.deliver"
    And its tool.deliver delivers to a destination the suite runs
    And the WAL seam is enabled
    When the agent requests a preflight for a plan that delivers
    And the agent calls tool "tool.deliver" without a preflight id
    Then the WAL holds a deny autonomy.decision frame for that call

  @req:contractrefine.tool.advisory-continues-to-policy @profile:contractrefine-tool-binding @fixture:contractrefine-advisory
  Scenario Outline: Advisory mode never refuses a call for its binding, whatever failed
    Given a ContractRefine host in "advisory" mode whose policy bundle requires preflight for "tool.deliver"
    And its tool.deliver delivers to a destination the suite runs
    When the agent requests a preflight <request>
    And the agent calls tool "tool.deliver" <binding>
    Then the response status is 200
    And the tool ran with the plan's params

    Examples:
      | failure                  | request                                          | binding                          |
      | unknown preflight id     | for a plan that delivers                         | bound to an unknown preflight id |
      | a deny                   | whose plan step kind differs from the capability | bound to that preflight          |
      | a repair_required        | for a plan whose params lack provenance          | bound to that preflight          |
      | a pass for another kind  | for a plan that satisfies every contract         | bound to that preflight          |
      | no preflight, required   | for a plan that delivers                         | without a preflight id           |

  @req:contractrefine.tool.advisory-continues-to-policy @profile:contractrefine-tool-binding @fixture:contractrefine-advisory
  Scenario Outline: Advisory mode lets policy decide after a failed binding
    Given a ContractRefine host whose runtime.contract_refine.mode is "advisory"
    When the agent requests a preflight whose plan step kind differs from the capability
    And the agent calls tool "<tool>" bound to that preflight
    Then the response status is <status>

    Examples:
      | tool          | status |
      | tool.echo     | 200    |
      | tool.unlisted | 403    |

  @req:contractrefine.tool.advisory-continues-to-policy @profile:contractrefine-tool-binding @fixture:contractrefine-advisory
  Scenario: Advisory mode does not block a call naming an unknown preflight
    Given a ContractRefine host whose runtime.contract_refine.mode is "advisory"
    When the agent calls tool "tool.echo" bound to an unknown preflight id
    Then the response status is 200

  @req:contractrefine.tool.enforce-mismatch-denied @profile:contractrefine-tool-binding @fixture:contractrefine-enforce
  Scenario Outline: Enforce mode denies, before it runs, a call its preflight does not bind
    Given a ContractRefine host whose runtime.contract_refine.mode is "enforce"
    And its tool.deliver delivers to a destination the suite runs
    When the agent requests a preflight <request>
    And the agent calls tool "tool.deliver" bound to that preflight
    Then the response status is 403
    And the tool did not run

    Examples:
      | request                                          |
      | whose plan step kind differs from the capability |
      | for a plan whose params lack provenance          |
      | for a plan that satisfies every contract         |

  @req:contractrefine.tool.enforce-mismatch-denied @profile:contractrefine-tool-binding @fixture:contractrefine-enforce
  Scenario: Enforce mode denies a call naming an unknown preflight
    Given a ContractRefine host whose runtime.contract_refine.mode is "enforce"
    And its tool.deliver delivers to a destination the suite runs
    When the agent calls tool "tool.deliver" bound to an unknown preflight id
    Then the response status is 403
    And the tool did not run

  @req:contractrefine.tool.enforce-mismatch-denied @profile:contractrefine-tool-binding @fixture:contractrefine-enforce
  Scenario Outline: Enforce mode denies, before it runs, a call bound to a preflight refused for its zone
    Given a ContractRefine host in "enforce" mode whose verifier allows only the zones "<allowed>"
    And its tool.deliver delivers to a destination the suite runs
    When the agent requests, for zone "<outside>", a preflight for a plan that delivers
    And the agent calls tool "tool.deliver" bound to that preflight
    Then the response status is 403
    And the tool did not run

    Examples:
      | allowed       | outside |
      | default, edge | lab     |
      | default, edge | west    |

  @req:contractrefine.tool.enforce-bound-call-allowed @profile:contractrefine-tool-binding @fixture:contractrefine-enforce
  Scenario Outline: Enforce mode runs a call bound to its passing preflight
    Given a ContractRefine host whose runtime.contract_refine.mode is "enforce"
    And its tool.deliver delivers to a destination the suite runs
    When the agent requests a preflight <request>
    And the agent calls tool "<tool>" bound to that preflight
    Then the response status is 200
    And the tool ran with the plan's params

    Examples:
      | request                                  | tool         |
      | for a plan that satisfies every contract | tool.echo    |
      | for a plan that delivers                 | tool.deliver |

  @req:contractrefine.tool.enforce-policy-requires-preflight @profile:contractrefine-tool-binding @fixture:contractrefine-enforce
  Scenario: A policy bundle that requires preflight denies an unbound call
    Given a ContractRefine host in "enforce" mode whose policy bundle requires preflight for "tool.deliver"
    And its tool.deliver delivers to a destination the suite runs
    When the agent calls tool "tool.deliver" without a preflight id
    Then the response status is 403
    And the tool did not run
    When the agent requests a preflight for a plan that delivers
    And the agent calls tool "tool.deliver" bound to that preflight
    Then the response status is 200
    And the tool ran with the plan's params

  @req:contractrefine.preflight.wal.audit-id-joins-tool-decision @profile:contractrefine-tool-binding @fixture:contractrefine-enforce
  Scenario: The tool decision frame joins its preflight on audit_id
    Given a ContractRefine host whose runtime.contract_refine.mode is "enforce"
    And the WAL seam is enabled
    When the agent requests a preflight for a plan that satisfies every contract
    And the agent calls tool "tool.echo" bound to that preflight
    Then the response status is 200
    And the WAL holds an autonomy.decision frame carrying that preflight's audit_id

  @req:contractrefine.preflight.wal.audit-join-chronological @profile:contractrefine-tool-binding @fixture:contractrefine-enforce
  Scenario: The audit query by audit_id lists the preflight before the tool decision it bound
    Given a ContractRefine host whose runtime.contract_refine.mode is "enforce"
    And the WAL seam is enabled
    When the agent requests a preflight for a plan that satisfies every contract
    And the agent calls tool "tool.echo" bound to that preflight
    Then the response status is 200
    And the audit query for that preflight's audit_id lists its autonomy.preflight frame before the call's autonomy.decision frame

  @req:contractrefine.tool.binding-expires @profile:contractrefine-tool-binding @fixture:contractrefine-enforce @exclusive
  Scenario: Enforce mode runs a call bound to a pass until the pass expires, and denies it after
    Given a ContractRefine host in "enforce" mode whose preflight bindings last 3 seconds for the agent
    And its tool.deliver delivers to a destination the suite runs
    When the agent requests a preflight for a plan that delivers
    And the agent calls tool "tool.deliver" bound to that preflight
    Then the response status is 200
    And the tool ran with the plan's params
    When the binding of that preflight has expired
    And the agent calls tool "tool.deliver" bound to that preflight
    Then the response status is 403
    And the tool did not run

  @req:contractrefine.tool.binding-expires @profile:contractrefine-tool-binding @fixture:contractrefine-advisory @exclusive
  Scenario: Advisory mode records an expired binding as a deny frame and lets policy decide
    Given a ContractRefine host in "advisory" mode whose preflight bindings last 3 seconds for the agent
    And its tool.deliver delivers to a destination the suite runs
    And the WAL seam is enabled
    When the agent requests a preflight for a plan that delivers
    And the agent calls tool "tool.deliver" bound to that preflight
    Then the response status is 200
    And the tool ran with the plan's params
    When the binding of that preflight has expired
    And the agent calls tool "tool.deliver" bound to that preflight
    Then the response status is 200
    And the tool ran with the plan's params
    And the WAL holds a deny autonomy.decision frame for that call

  @req:contractrefine.tool.binding-survives-restart @profile:contractrefine-tool-binding @fixture:contractrefine-enforce
  Scenario Outline: A pass answered before a restart still binds after it
    Given a ContractRefine host whose runtime.contract_refine.mode is "enforce"
    And its tool.deliver delivers to a destination the suite runs
    And the host keeps its state where the suite can restart it
    When the agent requests a preflight for a plan that delivers
    And the host <how>
    And the agent calls tool "tool.deliver" bound to that preflight
    Then the response status is 200
    And the tool ran with the plan's params
    When the agent calls tool "tool.deliver" bound to an unknown preflight id
    Then the response status is 403
    And the tool did not run

    Examples:
      | how                          |
      | is restarted                 |
      | crashes and is started again |
