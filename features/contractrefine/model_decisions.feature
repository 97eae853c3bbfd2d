# contractrefine-preflight.txt: POST and GET /v1/preflight, the repair
# ladder and its budget, and the /v1/tool binding in enforce mode, driven as
# seeded random sequences against an executable model (models/decisions;
# docs/models.md). The outcomes each reference request must reach are those
# of docs/hosts/contractrefine.md §2.1.
Feature: Preflight decisions agree with their model under any sequence of requests, reads and bound calls
  Hand-written scenarios send each reference request in one order. Here the
  suite draws sequences of every variant over two sessions and two plan
  hashes, so repair budgets interleave with passes and denials, reads of
  issued and unknown ids, and tool.echo calls bound to any decision; every
  answer is checked against the model, and a failing sequence is shrunk.

  @req:contractrefine.model.decisions @profile:contractrefine-preflight @fixture:contractrefine-enforce
  Scenario: Random sequences of preflights, reads and bound calls agree with the model
    Given a ContractRefine host in "enforce" mode allowing at most 2 repair attempts
    When the suite runs seeded random sequences of preflights, reads and bound tool calls against the model
    Then every answer agreed with the model of preflight decisions
