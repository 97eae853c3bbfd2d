# agl-behavioral-contracts.txt §5.3 Dynamic choices, as the workflow checker
# of agl-binding/1 judges them (docs/agl-binding.md §11). Rows name fixtures
# of scenarios/agl-checker.
@fixture:agl-core
Feature: An agent's whole tool set counts against the effect ceiling
  Static inference includes every tool an agent may select: giving an agent
  a write tool adds its effects even if the prompt says not to use it, and
  the effect ceiling must hold without predicting the model's choice.

  Background:
    Given an AGL host with a workflow checker

  @req:agl.checker.tool-set-effects @profile:agl-checker
  Scenario Outline: An agent whose every tool stays within the ceiling checks
    When the checker checks the workflow "<workflow>"
    Then the checker certifies it with effect bound "<effects>" and resources after "-"

    Examples:
      | workflow                        | effects                                  |
      | agent/read-only-tools           | network_read                             |
      | agent/write-tool-within-ceiling | email_send, external_write, network_read |

  @req:agl.checker.tool-set-effects @profile:agl-checker
  Scenario Outline: A tool set beyond the ceiling is rejected whatever the prompt says
    When the checker checks the workflow "<workflow>"
    Then the checker rejects it with "AGL-E0701" at <span>

    Examples:
      | workflow                        | span    |
      | agent/send-tool-beyond-ceiling  | 8:1-8:75 |
      | agent/write-tool-beyond-ceiling | 8:1-8:28 |
