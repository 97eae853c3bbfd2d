# agl-behavioral-contracts.txt §4 Contract model: 4.2 tool and task contracts
# (fingerprints, effect sets) and 4.3 authority grants (issuer, scope,
# delegation, revocation, deployment policy, the agent's tool set).
Feature: Operation contracts and authority grants
  A contract is a trusted declaration that must match its implementation
  before anything executes. Authority comes only from the host's
  authorization service, is scoped to a principal, operations and resources,
  may be narrowed but never widened by delegation, and stops at revocation.

  Background:
    Given an AGL host with a fake email destination the suite counts
    And a principal whose agent may use the email and transfer operations under a grant from the authorization service

  @req:agl.contract.fingerprint-verified @profile:agl-core @fixture:agl-core
  Scenario: A contract quoting another implementation fingerprint is not registered
    When the operator registers an email contract "mail.forged" that quotes a made-up implementation fingerprint
    Then the response is refused with status 409 and code "implementation_fingerprint_mismatch"
    And no contract named "mail.forged" is registered

  @req:agl.contract.fingerprint-verified @profile:agl-core @fixture:agl-core
  Scenario: A changed contract cannot take over a registered version
    When the operator registers the email contract again at version "1" allowing 2 attempts
    Then the response is refused with status 409 and code "contract_conflict"
    And the registered email contract still allows 1 attempt

  @req:agl.contract.fingerprint-verified @profile:agl-core @fixture:agl-core
  Scenario: A permit issued under one contract fingerprint does not dispatch once the contract changed
    Given the principal has an approved send of a draft to "bob@example.com"
    When the operator registers the email contract again at version "2" allowing 2 attempts
    Then the response status is 201
    When the agent dispatches the approved send
    Then the action is refused with status 409, code "contract_fingerprint_mismatch" and category "proposal_mismatch"
    And the destination received no message
    And the permit is not consumed

  @req:agl.contract.financial-keeps-external-write @profile:agl-core @fixture:agl-core
  Scenario: A financial contract that drops external_write is not registered
    When the operator registers a transfer contract "ledger.sneaky" whose possible effects are "financial_write"
    Then the response is refused with status 422 and code "invalid_contract"
    And no contract named "ledger.sneaky" is registered

  @req:agl.contract.financial-keeps-external-write @profile:agl-core @fixture:agl-core
  Scenario: A financial contract that keeps external_write registers with both effects
    When the operator registers a transfer contract "ledger.honest" whose possible effects are "external_write, financial_write"
    Then the response status is 201
    And the contract "ledger.honest" is registered with possible effects "external_write, financial_write"

  @req:agl.authority.issued-only-by-service @profile:agl-core @fixture:agl-core
  Scenario Outline: Nobody but the authorization service issues a grant
    When <who> asks the host to issue a grant for the principal
    Then the response is refused with status <status> and code "<code>"

    Examples:
      | who                                        | status | code              |
      | the agent, with no credentials,            | 401    | unauthenticated   |
      | the agent, presenting its own grant token, | 403    | wrong_credentials |
      | the operator                               | 403    | wrong_credentials |
      | the approval resolver                      | 403    | wrong_credentials |

  @req:agl.authority.issued-only-by-service @profile:agl-core @fixture:agl-core
  Scenario Outline: A grant the model makes up confers no authority
    Given the principal has an approved send of a draft to "bob@example.com"
    When the agent dispatches the approved send presenting <grant>
    Then the action is refused with status 403, code "authority_missing" and category "authorization_denied"
    And the destination received no message

    Examples:
      | grant                                      |
      | a grant token it made up                   |
      | the grant's public id instead of its token |
      | no grant at all                            |

  @req:agl.authority.issued-only-by-service @profile:agl-core @fixture:agl-core
  Scenario: A grant the service issued names the service as issuer and its full scope
    When the operator reads the principal's grant
    Then the grant names the host's authorization service as issuer, the principal as subject, its operations, resources, validity and no revocation

  @req:agl.authority.scope-enforced @profile:agl-core @fixture:agl-core
  Scenario Outline: A grant authorizes only its principal, operations, resources and validity
    Given the principal's grant is replaced by one that <grant>
    When the agent proposes a transfer of 1500 to "DE89370400440532013000"
    Then the action is refused with status 403, code "<code>" and category "authorization_denied"

    Examples:
      | grant                           | code                |
      | covers another account          | authority_missing   |
      | covers only the email operation | authority_missing   |
      | was issued to another principal | authority_missing   |
      | expired an hour ago             | grant_expired       |
      | becomes valid in an hour        | grant_not_yet_valid |

  @req:agl.authority.scope-enforced @profile:agl-core @fixture:agl-core
  Scenario: Authority is checked again at dispatch, not only when the action was proposed
    Given the principal has an approved send of a draft to "bob@example.com"
    And the principal's grant is replaced by one that expired an hour ago
    When the agent dispatches the approved send
    Then the action is refused with status 403, code "grant_expired" and category "authorization_denied"
    And the destination received no message
    And the permit is not consumed

  @req:agl.authority.scope-enforced @profile:agl-core @fixture:agl-core
  Scenario: A grant for one mailbox does not send from another
    Given the principal drafts an email from another mailbox to "bob@example.com"
    When the agent proposes sending the draft
    Then the action is refused with status 403, code "authority_missing" and category "authorization_denied"
    And the draft is "Draft"

  @req:agl.authority.delegation-only-narrows @profile:agl-core @fixture:agl-core
  Scenario Outline: A delegation that widens its parent is refused
    When the principal delegates its grant to a helper <widening>
    Then the response is refused with status 403 and code "delegation_widens"

    Examples:
      | widening                      |
      | adding an operation           |
      | adding a mailbox              |
      | with every resource of a kind |
      | expiring after the parent     |

  @req:agl.authority.delegation-only-narrows @profile:agl-core @fixture:agl-core
  Scenario: A narrower delegation works within its narrower scope only
    When the principal delegates its grant to a helper for the transfer operation only, expiring sooner
    Then the response status is 201
    And the delegated grant names the parent grant and expires no later than it
    When the helper's agent proposes sending an email under the delegated grant
    Then the action is refused with status 403, code "authority_missing" and category "authorization_denied"
    When the helper's agent proposes a transfer of 200 to "DE89370400440532013000" under the delegated grant
    Then the response status is 201

  @req:agl.authority.revocation-stops-dispatch @profile:agl-core @fixture:agl-core
  Scenario: Revoking the grant stops a dispatch that was approved before
    Given the principal has an approved send of a draft to "bob@example.com"
    When the authorization service revokes the principal's grant
    And the agent dispatches the approved send
    Then the action is refused with status 403, code "grant_revoked" and category "authorization_denied"
    And the destination received no message
    And the permit is not consumed

  @req:agl.authority.revocation-cascades @profile:agl-parley-binding @fixture:agl-core
  Scenario: Revoking a grant stops the grants delegated from it
    Given the principal has delegated its grant to a helper for the transfer operation only, expiring sooner
    When the authorization service revokes the principal's grant
    And the helper's agent proposes a transfer of 200 to "DE89370400440532013000" under the delegated grant
    Then the action is refused with status 403, code "grant_revoked" and category "authorization_denied"

  @req:agl.authority.revocation-cascades @profile:agl-parley-binding @fixture:agl-core
  Scenario: Revoking a grant stops an approved dispatch under a grant delegated from it
    Given the principal has delegated its grant to a helper for the transfer operation only, expiring sooner
    And the helper's agent proposes a transfer of 200 to "DE89370400440532013000" under the delegated grant
    And approval of the proposal is requested
    And the resolver grants the approval
    When the authorization service revokes the principal's grant
    And the helper's agent dispatches the approved transfer under the delegated grant
    Then the action is refused with status 403, code "grant_revoked" and category "authorization_denied"
    And the ledger received no transfer

  @req:agl.authority.deployment-policy-intersected @profile:agl-core @fixture:agl-restricted
  Scenario: Deployment policy narrows what a grant covers
    Given the host's deployment policy allows recipients only in "example.com"
    And the principal drafts an email to "eve@elsewhere.test"
    When the agent proposes sending the draft
    Then the action is refused with status 403, code "deployment_restricted" and category "authorization_denied"
    When the principal drafts an email to "bob@example.com"
    And the agent proposes sending the draft
    Then the response status is 201

  @req:agl.authority.deployment-policy-intersected @profile:agl-core @fixture:agl-restricted
  Scenario Outline: Deployment policy holds for every recipient, whichever field names it
    Given the host's deployment policy allows recipients only in "example.com"
    And the principal drafts an email to "<to>" copying "<cc>"
    When the agent proposes sending the draft
    Then the action is refused with status 403, code "deployment_restricted" and category "authorization_denied"
    When the principal drafts an email to "bob@example.com" copying "carol@EXAMPLE.com"
    And the agent proposes sending the draft
    Then the response status is 201

    Examples:
      | to                                  | cc                                        |
      | bob@example.com, eve@elsewhere.test |                                           |
      | bob@example.com                     | eve@elsewhere.test                        |
      | bob@example.com                     | carol@example.com, mallory@Elsewhere.Test |

  @req:agl.dispatch.toolset-enforced @profile:agl-core @fixture:agl-core
  Scenario: A registered, granted operation outside the agent's tool set is denied at dispatch
    Given the principal has an approved send of a draft to "bob@example.com"
    And the operator narrows the agent's tool set to "ledger.transfer"
    When the agent dispatches the approved send
    Then the action is refused with status 403, code "tool_not_in_toolset" and category "authorization_denied"
    And the destination received no message
    And the permit is not consumed
