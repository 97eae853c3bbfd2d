# agl-behavioral-contracts.txt §10 Framework API and implementation
# boundaries: check_workflow over a versioned IR, the checked-workflow
# certificate (which authorizes nothing), and the compatibility rules of
# module interfaces at contract registration (with §4.2's fingerprints);
# through agl-binding/1 (docs/agl-binding.md §11 and §3).
@fixture:agl-core
Feature: Checked workflows and module interfaces
  check_workflow turns a workflow into a checked workflow or diagnostics; a
  compiler certificate is not an authorization to execute. A module's
  interface (authority requirements, protocols, effects, approval and
  idempotency contracts) is part of its fingerprint, and changing it
  incompatibly is an exported compatibility change.

  @req:agl.checker.ir-versioned @profile:agl-checker
  Scenario Outline: A document that is not an agl-workflow/1 workflow is refused, neither certified nor diagnosed
    Given an AGL host with a workflow checker
    When the checker checks the workflow "match/dispatch-all-outcomes" <how>
    Then the response is refused with status 422 and code "<code>"

    Examples:
      | how                                                          | code                   |
      | declaring IR version "agl-workflow/2"                        | unsupported_ir_version |
      | declaring IR version "agl-workflow/0.9"                      | unsupported_ir_version |
      | with an unknown statement kind                               | invalid_workflow       |
      | with a statement that has no span                            | invalid_workflow       |
      | with a member the IR does not define                         | invalid_workflow       |
      | with an operation that does not say whether it is idempotent | invalid_workflow       |

  @req:agl.checker.certificate @profile:agl-checker
  Scenario Outline: A workflow that checks is certified: that very document, its effect bound, what it leaves available
    Given an AGL host with a workflow checker
    When the checker checks the workflow "<workflow>"
    Then the checker certifies it with effect bound "<effects>" and resources after "<after>"
    When the checker checks the workflow "<workflow>" again, its members in another order
    Then the checker certifies it with effect bound "<effects>" and resources after "<after>"

    Examples:
      | workflow                     | effects                                 | after                                              |
      | join/if-both-edit            | -                                       | d: email_draft Proposed                            |
      | parallel/disjoint-drafts     | -                                       | d1: email_draft Proposed, d2: email_draft Proposed |
      | try/catch-keeps-other-handle | email_send, external_write              | e: email_draft Draft                               |
      | permit/exact-action          | external_write, financial_write, human  | -                                                  |
      | forged/model-output-as-data  | network_read                            | nd: email_draft Draft                              |

  @req:agl.checker.certificate-not-authorization @profile:agl-checker
  Scenario Outline: A certificate presented in place of a permit does not dispatch
    Given an AGL host with a fake email destination the suite counts
    And a principal whose agent may use the email and transfer operations under a grant from the authorization service
    And the principal has an approved send of a draft to "bob@example.com"
    And the checker has certified the workflow "boolean/granted-narrows"
    When the agent dispatches the approved send with the workflow's certificate <how> instead of its permit
    Then the action is refused with status 403, code "<code>" and category "authorization_denied"
    And the destination received no message
    And the permit is not consumed

    Examples:
      | how                        | code                     |
      | as its approval            | unauthenticated_decision |
      | as its decision            | unauthenticated_decision |
      | digest as its permit token | unbound_approval         |

  @req:agl.contract.interface-compatibility @profile:agl-core
  Scenario Outline: An incompatible interface change under the same major version is refused
    Given an AGL host with a fake email destination the suite counts
    And a principal whose agent may use the email and transfer operations under a grant from the authorization service
    When the operator registers the email contract again at version "<version>" with <change>
    Then the response is refused with status 409 and code "incompatible_contract_change"
    And the registered email contract is version "1" still, with its first fingerprint

    Examples:
      | version | change                                           |
      | 1.1     | an added effect audit_write                      |
      | 1.2     | an added authority requirement on the recipients |
      | 1.0.1   | the approver role treasurer                      |

  # Section 10 lists added authority or effects, strengthened preconditions
  # and changed states or approval bindings; removing authority or changing
  # the idempotency contract is not on that list, so refusing them under
  # the same major version is parley's binding.
  @req:agl.contract.interface-binding-changes @profile:agl-parley-binding
  Scenario Outline: parley's binding: removing authority or changing idempotency under the same major version is refused
    Given an AGL host with a fake email destination the suite counts
    And a principal whose agent may use the email and transfer operations under a grant from the authorization service
    When the operator registers the email contract again at version "<version>" with <change>
    Then the response is refused with status 409 and code "incompatible_contract_change"
    And the registered email contract is version "1" still, with its first fingerprint

    Examples:
      | version | change                           |
      | 1.1     | no authority requirement         |
      | 1.1     | deduplication by destination key |

  @req:agl.contract.interface-compatibility @profile:agl-core
  Scenario Outline: A compatible change registers as a minor version, with a new fingerprint
    Given an AGL host with a fake email destination the suite counts
    And a principal whose agent may use the email and transfer operations under a grant from the authorization service
    When the operator registers the email contract again at version "<version>" with <change>
    Then the response status is 201
    And the registered email contract is version "<version>" now, with another fingerprint

    Examples:
      | version | change               |
      | 1.1     | 2 attempts           |
      | 1.0.1   | a timeout of 5000 ms |

  @req:agl.contract.interface-compatibility @profile:agl-core
  Scenario: An incompatible change registers under a new major version
    Given an AGL host with a fake email destination the suite counts
    And a principal whose agent may use the email and transfer operations under a grant from the authorization service
    When the operator registers the email contract again at version "2" with an added effect audit_write
    Then the response status is 201
    And the registered email contract is version "2" now, with another fingerprint

  @req:agl.contract.interface-compatibility @profile:agl-core
  Scenario: A permit issued before a compatible change does not dispatch under the new fingerprint
    Given an AGL host with a fake email destination the suite counts
    And a principal whose agent may use the email and transfer operations under a grant from the authorization service
    And the principal has an approved send of a draft to "bob@example.com"
    When the operator registers the email contract again at version "1.1" with 2 attempts
    Then the response status is 201
    When the agent dispatches the approved send
    Then the action is refused with status 409, code "contract_fingerprint_mismatch" and category "proposal_mismatch"
    And the destination received no message
    And the permit is not consumed
