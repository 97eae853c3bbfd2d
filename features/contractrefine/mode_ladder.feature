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

  @req:contractrefine.preflight.mode.empty-defaults-advisory @profile:contractrefine-preflight @fixture:contractrefine-default
  Scenario: An unset mode lets a call with a failed binding continue to policy
    Given a ContractRefine host whose runtime.contract_refine.mode is unset
    When the agent requests a preflight whose plan step kind differs from the capability
    And the agent calls tool "tool.echo" bound to that preflight
    Then the response status is 200

  @req:contractrefine.preflight.mode.well-formed-preserved @profile:contractrefine-preflight
  Scenario Outline: A well-formed mode is kept as configured
    Given a ContractRefine host whose runtime.contract_refine.mode is "<mode>"
    When the agent requests a preflight for a plan that satisfies every contract
    Then the response status is <preflight status>
    When the agent calls tool "tool.echo" bound to an unknown preflight id
    Then the response status is <tool status>

    @fixture:contractrefine-disabled
    Examples:
      | mode     | preflight status | tool status |
      | disabled | 503              | 200         |

    @fixture:contractrefine-advisory
    Examples:
      | mode     | preflight status | tool status |
      | advisory | 200              | 200         |

    @fixture:contractrefine-enforce
    Examples:
      | mode     | preflight status | tool status |
      | enforce  | 200              | 403         |

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
