# contractrefine-preflight.txt, "Mode ladder" and its resolution rules.
Feature: ContractRefine mode ladder
  One knob, runtime.contract_refine.mode, gates both preflight endpoints and
  decides how /v1/tool treats a preflight binding. An unset knob means
  advisory; a typo must never open the surface.

  @req:contractrefine.preflight.mode.empty-defaults-advisory @profile:contractrefine-preflight @fixture:contractrefine-default
  Scenario: An unset mode answers preflights as advisory does
    Given a ContractRefine host whose runtime.contract_refine.mode is unset
    When the agent requests a preflight for a plan that satisfies every contract
    Then the response status is 200
    And the response field "outcome" is "pass"

  # Advisory and enforce differ on /v1/tool only: enforce refuses a failed
  # binding and a call missing a preflight its bundle requires, advisory
  # neither. Either refusal missing marks advisory; each refusal alone is
  # another id's rule, so one broken advisory behaviour is not a wrong mode.
  @req:contractrefine.preflight.mode.empty-defaults-advisory @profile:contractrefine-preflight @fixture:contractrefine-default
  Scenario: An unset mode lets through a call enforce would refuse
    Given a ContractRefine host whose runtime.contract_refine.mode is unset and whose policy bundle requires preflight for "tool.echo"
    When the agent requests a preflight whose plan step kind differs from the capability
    And the agent calls tool "tool.echo" bound to that preflight
    And the agent calls tool "tool.echo" without a preflight id
    Then the calls show the "advisory" mode: at least one is let through

  @req:contractrefine.preflight.mode.well-formed-preserved @profile:contractrefine-preflight @fixture:contractrefine-disabled
  Scenario: An explicit disabled is kept as configured
    Given a ContractRefine host whose runtime.contract_refine.mode is "disabled"
    When the agent requests a preflight for a plan that satisfies every contract
    And the agent retrieves an unknown preflight id
    Then the endpoints show the "disabled" mode: at least one answers 503

  @req:contractrefine.preflight.mode.well-formed-preserved @profile:contractrefine-preflight
  Scenario Outline: An explicit advisory or enforce is kept as configured
    Given a ContractRefine host in "<mode>" mode whose policy bundle requires preflight for "tool.deliver"
    And its tool.deliver delivers to a destination the suite runs
    When the agent requests a preflight for a plan that satisfies every contract
    Then the response status is 200
    When the agent calls tool "tool.deliver" bound to an unknown preflight id
    And the agent calls tool "tool.deliver" without a preflight id
    Then the calls show the "<mode>" mode: <mark>

    @fixture:contractrefine-advisory
    Examples:
      | mode     | mark                        |
      | advisory | at least one is let through |

    @fixture:contractrefine-enforce
    Examples:
      | mode     | mark                        |
      | enforce  | at least one is refused     |

  @req:contractrefine.preflight.mode.typo-falls-back-to-disabled @profile:contractrefine-preflight
  Scenario Outline: A misspelt mode resolves to disabled
    Given a ContractRefine host whose runtime.contract_refine.mode is "<typo>"
    When the agent requests a preflight for a plan that satisfies every contract
    Then the response status is 503
    When the agent retrieves an unknown preflight id
    Then the response status is 503

    @fixture:contractrefine-typo-spelling
    Examples:
      | typo      |
      | advsiory  |

    @fixture:contractrefine-typo-case
    Examples:
      | typo      |
      | ENFORCE   |

    @fixture:contractrefine-typo-suffix
    Examples:
      | typo      |
      | enforced  |

  @req:contractrefine.preflight.mode.typo-startup-warning @profile:contractrefine-preflight
  Scenario Outline: A misspelt mode is named in a startup warning
    Given a ContractRefine host whose runtime.contract_refine.mode is "<typo>"
    When the agent requests a preflight for a plan that satisfies every contract
    Then the host's startup log has a warning that names "<typo>"

    @fixture:contractrefine-typo-spelling
    Examples:
      | typo      |
      | advsiory  |

    @fixture:contractrefine-typo-case
    Examples:
      | typo      |
      | ENFORCE   |
