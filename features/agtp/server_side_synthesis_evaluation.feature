# agtp-rcns.txt, "Server-Side Synthesis Evaluation". The suite's policy:
# PENCIL is a custom method the server declares that nothing composes; LIST
# /desk/{id} has no recipe; recipe hall-booking covers BOOK /hall/{id} but
# composes a capability the server does not have; SCHEDULE /slot/{id} is
# composable (a passthrough) but the PROPOSE policy refuses it, as it
# refuses RESERVE /desk/{id}, which nothing composes either.
# "billing:charge" is a scope the proposal declares beyond what the
# composition needs. "Holds no contract for the proposed pair" is witnessed
# through the Tier C resolver (docs/interpretations.md); it is not checked
# where the proposed pair is malformed on purpose, since no request can
# address it.
@fixture:agtp-confirm-first
Feature: Server-side synthesis evaluation
  The server evaluates a proposal's method, path, semantic block, schemas,
  authority, the capability envelope and its policy, in that order, and the
  first failing check answers.

  @req:agtp.propose.eval.method-459 @profile:agtp-rcns
  Scenario Outline: A proposed method outside the catalog answers 459 [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And the scenario sends a malformed method on purpose
    When "alice" proposes ZZBOGUS /room/{room}
    Then the response status is 459
    And the response names no synthesis_id

    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.propose.eval.method-459 @profile:agtp-rcns
  Scenario Outline: A custom method the server declares passes method conformance [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And the server declares custom method PENCIL
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" proposes PENCIL /room/{room}
    Then the response status is not 459
    And the response names no synthesis_id
    And "alice" holds no contract for the proposed pair

    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.propose.eval.path-460 @profile:agtp-rcns
  Scenario Outline: Path conformance (<path>) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And the scenario sends a malformed path on purpose
    When "alice" proposes BOOK <path>
    Then the response status is 460
    And the response names no synthesis_id

    Examples:
      | path         | transport          |
      | /Room/{room} | TLS 1.3            |
      | room/{room}  | plaintext loopback |
      | /book/{room} | TLS 1.3            |
      | /Room/{room} | plaintext loopback |

  # A 400 names no reason the texts give, so each scenario shows that the
  # refusal is for the defect: the same proposal without it is approved.
  @req:agtp.propose.eval.semantic-400 @profile:agtp-rcns
  Scenario Outline: Semantic block conformance (<defect>) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" proposes BOOK /room/{room} <defect>
    Then the response status is 400
    And the response names no synthesis_id
    And "alice" holds no contract for the proposed pair
    When "alice" proposes BOOK /room/{room}
    Then the response is a 263 for BOOK /room/{room}

    Examples:
      | defect                    | transport          |
      | without a semantic intent | TLS 1.3            |
      | without a semantic intent | plaintext loopback |
      | without a semantic block  | TLS 1.3            |
      | without a semantic block  | plaintext loopback |

  @req:agtp.propose.eval.schema-400 @profile:agtp-rcns
  Scenario Outline: Schema conformance (<defect>) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" proposes BOOK /room/{room} <defect>
    Then the response status is 400
    And the response names no synthesis_id
    And "alice" holds no contract for the proposed pair
    When "alice" proposes BOOK /room/{room}
    Then the response is a 263 for BOOK /room/{room}

    Examples:
      | defect                        | transport          |
      | with an invalid input schema  | TLS 1.3            |
      | with an invalid input schema  | plaintext loopback |
      | with an invalid output schema | TLS 1.3            |
      | with an invalid output schema | plaintext loopback |

  @req:agtp.propose.eval.authority-262 @profile:agtp-rcns
  Scenario Outline: A required scope granted but not claimed answers 262 scope-required [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, billing:*, rcns:negotiate"
    When "alice" proposes BOOK /room/{room} declaring authority "rooms:write, billing:charge" claiming "rcns:negotiate, rooms:write"
    Then the response status is 262 with reason scope-required naming scope billing:charge
    And the response names no synthesis_id
    And "alice" holds no contract for the proposed pair

    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.propose.eval.authority-455 @profile:agtp-rcns
  Scenario Outline: A required scope the identity document does not grant answers 455 scope-exceeded [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" proposes BOOK /room/{room} declaring authority "rooms:write, billing:charge"
    Then the response status is 455 with reason scope-exceeded naming scope billing:charge
    And the response names no synthesis_id
    And "alice" holds no contract for the proposed pair

    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.propose.eval.composition-impossible-463 @profile:agtp-rcns
  Scenario Outline: A proposal the server cannot compose answers 463 composition-impossible (<method> <path>) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And method <method> is a catalog verb or a custom method the server declares
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" proposes <method> <path>
    Then the response status is 463 with reason composition-impossible
    And "alice" holds no contract for the proposed pair

    Examples:
      | method | path         | transport          |
      | LIST   | /desk/{desk} | TLS 1.3            |
      | LIST   | /desk/{desk} | plaintext loopback |
      | PENCIL | /room/{room} | TLS 1.3            |
      | PENCIL | /room/{room} | plaintext loopback |
      | BOOK   | /hall/{hall} | TLS 1.3            |
      | BOOK   | /hall/{hall} | plaintext loopback |

  @req:agtp.propose.eval.policy-refused-463 @profile:agtp-rcns
  Scenario Outline: A composable proposal the policy does not permit answers 463 policy-refused [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And the PROPOSE policy refuses SCHEDULE /slot/{id}
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" proposes SCHEDULE /slot/{slot}
    Then the response status is 463 with reason policy-refused
    And the response names no synthesis_id
    And "alice" holds no contract for the proposed pair

    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.propose.eval.first-failure-answers @profile:agtp-rcns
  Scenario Outline: A proposal failing two checks gets the first one's answer (<case>) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And the scenario sends a malformed <malformed> on purpose
    When "alice" proposes <method> <path> <defect>
    Then the response status is <answer>
    And the response names no synthesis_id

    Examples:
      | case                       | malformed       | method  | path         | defect                    | answer | transport          |
      | method before path         | method and path | ZZBOGUS | /Room/{room} | in the wrapped form       | 459    | TLS 1.3            |
      | method before path         | method and path | ZZBOGUS | /Room/{room} | in the wrapped form       | 459    | plaintext loopback |
      | path before semantic block | path            | BOOK    | /Room/{room} | without a semantic intent | 460    | TLS 1.3            |
      | path before semantic block | path            | BOOK    | /Room/{room} | without a semantic intent | 460    | plaintext loopback |

  @req:agtp.propose.eval.first-failure-answers @profile:agtp-rcns
  Scenario Outline: A proposal failing two checks gets the first one's answer (<case>) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" proposes <method> <path> <defect>
    Then the response status is <answer>
    And "alice" holds no contract for the proposed pair

    Examples:
      | case                            | method  | path         | defect                                                                         | answer                                 | transport          |
      | semantic block before authority | BOOK    | /room/{room} | without a semantic intent declaring authority "rooms:write, billing:charge"    | 400                                    | TLS 1.3            |
      | semantic block before authority | BOOK    | /room/{room} | without a semantic intent declaring authority "rooms:write, billing:charge"    | 400                                    | plaintext loopback |
      | schema before authority         | BOOK    | /room/{room} | with an invalid input schema declaring authority "rooms:write, billing:charge" | 400                                    | TLS 1.3            |
      | schema before authority         | BOOK    | /room/{room} | with an invalid input schema declaring authority "rooms:write, billing:charge" | 400                                    | plaintext loopback |
      | authority before capability     | LIST    | /desk/{desk} | declaring authority "billing:charge"                                           | 455 with reason scope-exceeded         | TLS 1.3            |
      | authority before capability     | LIST    | /desk/{desk} | declaring authority "billing:charge"                                           | 455 with reason scope-exceeded         | plaintext loopback |

  # RESERVE /desk/{id} fails two checks only because the policy refuses it:
  # nothing composes it, and the PROPOSE policy lists it as refused.
  @req:agtp.propose.eval.first-failure-answers @profile:agtp-rcns
  Scenario Outline: A proposal failing two checks gets the first one's answer (capability before policy) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And the PROPOSE policy refuses RESERVE /desk/{id}
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" proposes RESERVE /desk/{desk} in the wrapped form
    Then the response status is 463 with reason composition-impossible
    And "alice" holds no contract for the proposed pair

    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |
