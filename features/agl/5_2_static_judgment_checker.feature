# agl-behavioral-contracts.txt §5.2 Static judgment, with the rules it
# checks from §4.2-4.3 (declarations, authority), §5.1 (stale and forged
# handles), §6.1 (what a permit approves), §6.3 (legacy approvals) and §8/§12
# (retries), through the workflow checker of agl-binding/1
# (docs/agl-binding.md §11). Each row names a fixture of scenarios/agl-checker;
# its .agl file shows the workflow, the spans point at its lines.
@fixture:agl-core
Feature: The protocol and ownership checker's judgment
  The checker judges a workflow before anything runs. Ordinary values may be
  shared, but owned resource handles and one-shot permits are tracked through
  every construct, every call is held to its declaration, and a workflow that
  would use a consumed, stale, forged or unapproved resource is rejected with
  a diagnostic at the place where it would happen.

  Background:
    Given an AGL host with a workflow checker

  @req:agl.protocol.static-judgment @profile:agl-checker
  Scenario Outline: After a join a resource is available only as every reachable path leaves it
    When the checker checks the workflow "<workflow>"
    Then the checker certifies it with effect bound "<effects>" and resources after "<after>"

    Examples:
      | workflow                     | effects                    | after                   |
      | join/if-same-state           | -                          | d: email_draft Proposed |
      | join/if-both-edit            | -                          | d: email_draft Proposed |
      | join/denied-path-returns     | human                      | -                       |
      | join/outcome-states-finished | email_send, external_write | -                       |

  @req:agl.protocol.static-judgment @profile:agl-checker
  Scenario Outline: Using a resource the joining paths disagree on, or a name one branch bound, is rejected
    When the checker checks the workflow "<workflow>"
    Then the checker rejects it with "<code>" at <span>

    Examples:
      | workflow                            | code      | span        |
      | join/consumed-on-one-branch         | AGL-E0210 | 14:29-14:30 |
      | join/states-differ-used-after       | AGL-E0210 | 13:26-13:27 |
      | join/match-states-differ-used-after | AGL-E0210 | 22:29-22:30 |
      | try/join-disagrees                  | AGL-E0210 | 17:29-17:30 |
      | join/branch-local-name              | AGL-E0001 | 15:18-15:20 |

  @req:agl.checker.boolean-no-narrowing @profile:agl-checker
  Scenario Outline: A Bool may steer control flow; only a Granted outcome narrows a resource
    When the checker checks the workflow "<workflow>"
    Then the checker certifies it with effect bound "<effects>" and resources after "<after>"

    Examples:
      | workflow                 | effects                           | after                |
      | boolean/if-plain-control | human                             | d: email_draft Draft |
      | boolean/granted-narrows  | email_send, external_write, human | -                    |

  @req:agl.checker.boolean-no-narrowing @profile:agl-checker
  Scenario Outline: A Bool narrows nothing, is no outcome and no permit
    When the checker checks the workflow "<workflow>"
    Then the checker rejects it with "<code>" at <span>

    Examples:
      | workflow                       | code      | span        |
      | boolean/if-approved-then-send  | AGL-E0201 | 12:31-12:32 |
      | boolean/match-bool-as-decision | AGL-E0202 | 9:7-9:9     |
      | boolean/bool-as-permit         | AGL-E0501 | 9:37-9:39   |

  @req:agl.checker.match-exhaustive @profile:agl-checker
  Scenario Outline: A match that handles every outcome checks
    When the checker checks the workflow "<workflow>"
    Then the checker certifies it with effect bound "<effects>" and resources after "<after>"

    Examples:
      | workflow                    | effects                           | after |
      | match/dispatch-all-outcomes | email_send, external_write, human | -     |
      | match/reconcile-both        | -                                 | -     |

  @req:agl.checker.match-exhaustive @profile:agl-checker
  Scenario Outline: A match missing an outcome, or naming one twice or one that cannot happen, is rejected
    When the checker checks the workflow "<workflow>"
    Then the checker rejects it with "<code>" at <span>

    Examples:
      | workflow              | code      | span      |
      | match/missing-unknown | AGL-E0401 | 10:1-17:2 |
      | match/missing-denied  | AGL-E0401 | 10:1-14:2 |
      | match/unknown-tag     | AGL-E0402 | 20:3-22:4 |
      | match/duplicate-arm   | AGL-E0402 | 17:3-19:4 |

  @req:agl.checker.loop-invariant @profile:agl-checker
  Scenario Outline: A loop that keeps its resource invariant checks
    When the checker checks the workflow "<workflow>"
    Then the checker certifies it with effect bound "<effects>" and resources after "<after>"

    Examples:
      | workflow                       | effects                           | after                   |
      | loop/read-each-item            | -                                 | d: email_draft Draft    |
      | loop/edit-each-iteration       | -                                 | d: email_draft Proposed |
      | loop/fresh-draft-per-iteration | email_send, external_write, human | -                       |

  @req:agl.checker.loop-invariant @profile:agl-checker
  Scenario Outline: A loop body that consumes or changes a resource from outside the loop is rejected
    When the checker checks the workflow "<workflow>"
    Then the checker rejects it with "<code>" at <span>

    Examples:
      | workflow                    | code      | span        |
      | loop/consumes-outer-permit  | AGL-E0310 | 12:39-12:40 |
      | loop/consumes-in-one-branch | AGL-E0310 | 12:3-14:4   |
      | loop/proposes-outer-draft   | AGL-E0311 | 10:1-12:2   |

  @req:agl.checker.try-catch @profile:agl-checker
  Scenario Outline: Failure outcomes caught with the handles they carry check
    When the checker checks the workflow "<workflow>"
    Then the checker certifies it with effect bound "<effects>" and resources after "<after>"

    Examples:
      | workflow                         | effects                    | after                |
      | try/catch-failures               | email_send, external_write | -                    |
      | try/catch-keeps-other-handle     | email_send, external_write | e: email_draft Draft |

  @req:agl.checker.try-catch @profile:agl-checker
  Scenario Outline: A catch clause cannot resurrect what the try body consumed, and every outcome is handled
    When the checker checks the workflow "<workflow>"
    Then the checker rejects it with "<code>" at <span>

    Examples:
      | workflow              | code      | span        |
      | try/resurrect-permit  | AGL-E0101 | 12:39-12:40 |
      | try/resurrect-handle  | AGL-E0101 | 13:31-13:32 |
      | try/unhandled-unknown | AGL-E0330 | 10:3-10:70  |
      | try/bind-outside-try  | AGL-E0330 | 10:1-10:68  |
      | try/dead-catch        | AGL-E0331 | 10:9-12:2   |

  @req:agl.checker.fallback-not-affine @profile:agl-checker
  Scenario Outline: A value may fall back to a value
    When the checker checks the workflow "<workflow>"
    Then the checker certifies it with effect bound "<effects>" and resources after "<after>"

    Examples:
      | workflow              | effects                    | after                |
      | fallback/cached-value | -                          | d: email_draft Draft |
      | fallback/message-id   | email_send, external_write | -                    |

  @req:agl.checker.fallback-not-affine @profile:agl-checker
  Scenario Outline: A fallback value cannot stand in for a permit or a handle
    When the checker checks the workflow "<workflow>"
    Then the checker rejects it with "AGL-E0520" at <span>

    Examples:
      | workflow                 | span        |
      | fallback/permit-literal  | 9:54-9:73   |
      | fallback/permit-variable | 11:54-11:55 |
      | fallback/handle          | 8:72-8:73   |

  @req:agl.checker.operation-declaration @profile:agl-checker
  Scenario: Calls that match their declarations check
    When the checker checks the workflow "operation/well-typed"
    Then the checker certifies it with effect bound "-" and resources after "nd: email_draft Draft"

  @req:agl.checker.operation-declaration @profile:agl-checker
  Scenario Outline: A call whose inputs, authority kinds, effects or states do not match its declaration is rejected
    When the checker checks the workflow "<workflow>"
    Then the checker rejects it with "<code>" at <span>

    Examples:
      | workflow                             | code      | span       |
      | operation/missing-input              | AGL-E0110 | 7:1-7:61   |
      | operation/unknown-input              | AGL-E0110 | 8:40-8:47  |
      | operation/wrong-value-type           | AGL-E0110 | 8:86-8:92  |
      | operation/wrong-handle-kind          | AGL-E0110 | 8:26-8:27  |
      | operation/missing-authority          | AGL-E0120 | 7:1-7:88   |
      | operation/effect-outside-ceiling     | AGL-E0130 | 7:1-7:83   |
      | operation/input-state                | AGL-E0201 | 8:28-8:29  |
      | operation/undeclared                 | AGL-E0002 | 8:1-8:38   |
      | operation/financial-without-external | AGL-E0901 | 6:1-6:247  |

  @req:agl.checker.affine-consumption @profile:agl-checker
  Scenario: A permit moved to another name is used once there
    When the checker checks the workflow "affine/move-then-use"
    Then the checker certifies it with effect bound "email_send, external_write" and resources after "-"

  @req:agl.checker.affine-consumption @profile:agl-checker
  Scenario Outline: A consumed or moved handle or permit cannot be used again
    When the checker checks the workflow "<workflow>"
    Then the checker rejects it with "AGL-E0101" at <span>

    Examples:
      | workflow                 | span        |
      | affine/double-dispatch   | 10:37-10:38 |
      | affine/use-after-move    | 10:37-10:38 |
      | affine/handle-after-send | 10:29-10:30 |

  @req:agl.checker.permit-binding @profile:agl-checker
  Scenario: The action dispatched is exactly the one approved
    When the checker checks the workflow "permit/exact-action"
    Then the checker certifies it with effect bound "external_write, financial_write, human" and resources after "-"

  @req:agl.checker.permit-binding @profile:agl-checker
  Scenario Outline: A protected call without its permit, or with one approving something else, is rejected
    When the checker checks the workflow "<workflow>"
    Then the checker rejects it with "<code>" at <span>

    Examples:
      | workflow                | code      | span        |
      | permit/missing          | AGL-E0140 | 8:1-8:39    |
      | permit/other-operation  | AGL-E0141 | 9:37-9:38   |
      | permit/other-draft      | AGL-E0141 | 10:37-10:38 |
      | permit/changed-argument | AGL-E0141 | 13:86-13:90 |

  @req:agl.checker.stale-handle @profile:agl-checker
  Scenario: An edited draft is proposed and approved again before it is sent
    When the checker checks the workflow "stale/repropose-new-revision"
    Then the checker certifies it with effect bound "email_send, external_write, human" and resources after "-"

  @req:agl.checker.stale-handle @profile:agl-checker
  Scenario Outline: The handle, proposal or permit of a revision an edit superseded is stale
    When the checker checks the workflow "<workflow>"
    Then the checker rejects it with "AGL-E0230" at <span>

    Examples:
      | workflow                    | span        |
      | stale/old-handle-after-edit | 9:32-9:33   |
      | stale/proposal-after-edit   | 10:18-10:20 |
      | stale/permit-after-edit     | 13:41-13:42 |

  @req:agl.checker.forged-values @profile:agl-checker
  Scenario: Model output used as ordinary data checks
    When the checker checks the workflow "forged/model-output-as-data"
    Then the checker certifies it with effect bound "network_read" and resources after "nd: email_draft Draft"

  @req:agl.checker.forged-values @profile:agl-checker
  Scenario Outline: A handle, permit or approval made from a literal, model or host output, or minted by a declared operation, is rejected
    When the checker checks the workflow "<workflow>"
    Then the checker rejects it with "<code>" at <span>

    Examples:
      | workflow                       | code      | span      |
      | forged/literal-permit          | AGL-E0501 | 8:37-8:59 |
      | forged/typed-let               | AGL-E0501 | 7:29-7:39 |
      | forged/model-handle            | AGL-E0501 | 8:32-8:37 |
      | forged/host-output-permit      | AGL-E0501 | 9:37-9:42 |
      | forged/model-json-granted      | AGL-E0501 | 9:7-9:12  |
      | forged/declared-permit-minting | AGL-E0901 | 7:1-7:242 |

  @req:agl.checker.retry-safety @profile:agl-checker
  Scenario: Retrying an idempotent write that consumes nothing checks
    When the checker checks the workflow "retry/idempotent-put"
    Then the checker certifies it with effect bound "external_write" and resources after "d: email_draft Draft"

  @req:agl.checker.retry-safety @profile:agl-checker
  Scenario Outline: A retry that could repeat a write or reuse a consumed permit is rejected
    When the checker checks the workflow "<workflow>"
    Then the checker rejects it with "AGL-E0320" at <span>

    Examples:
      | workflow                  | span      |
      | retry/send-in-retry       | 11:5-11:72 |
      | retry/non-idempotent-post | 9:5-9:83  |
