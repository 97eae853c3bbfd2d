# contractrefine-preflight.txt: the mode ladder, POST and GET /v1/preflight,
# the repair ladder and its budget, "WAL event", and the /v1/tool binding in
# each mode, driven as seeded random sequences against an executable model
# (models/decisions; docs/models.md). The outcomes each reference request
# must reach are those of docs/hosts/contractrefine.md §2.1.
Feature: Preflight decisions, their WAL frames and tool bindings agree with their model under any sequence, in every mode of the ladder
  Hand-written scenarios send each reference request in one order. Here the
  suite draws sequences of every variant over two sessions and two plan
  hashes, so repair budgets interleave with passes and denials, reads of
  issued and unknown ids, and tool.echo and tool.deliver calls bound to any
  decision, to an unknown id or to none; every answer, the WAL frame of every
  decision and call, and every delivery at the suite's destination is
  checked against the model of the fixture's mode, and a failing sequence
  is shrunk.

  @req:contractrefine.model.decisions @profile:contractrefine-preflight
  Scenario Outline: Random sequences of preflights, reads and bound calls agree with the model [<mode>]
    Given a ContractRefine host whose runtime.contract_refine.mode is "<mode>"
    And the WAL seam is enabled
    And its tool.deliver delivers to a destination the suite runs
    When the suite runs seeded random sequences of preflights, reads and bound tool calls against the model
    Then every answer agreed with the model of preflight decisions

    @fixture:contractrefine-enforce
    Examples: enforce
      | mode    |
      | enforce |

    @fixture:contractrefine-advisory
    Examples: advisory
      | mode     |
      | advisory |

    @fixture:contractrefine-disabled
    Examples: disabled
      | mode     |
      | disabled |
