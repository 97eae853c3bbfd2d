# agl-behavioral-contracts.txt §10 Framework API and implementation
# boundaries, with §4.2: what a contract's fingerprint covers, and which
# handlers may register as protected operations.
Feature: Contract interfaces and the handlers behind them
  A module interface's fingerprint covers its authority requirements,
  protocol, effects, approval requirement and outcome and idempotency
  contracts, so a declaration that differs in any of them is another
  contract, never the registered one. Legacy handlers stay usable for
  legacy workflows but cannot register as protected operations.

  Background:
    Given an AGL host with a fake email destination the suite counts
    And a principal whose agent may use the email and transfer operations under a grant from the authorization service

  @req:agl.contract.fingerprint-covers-interface @profile:agl-core @fixture:agl-core
  Scenario Outline: A declaration that differs in any part of the interface is not the registered contract
    When the operator registers the email contract again at version "1" with <change>
    Then the response is refused with status 409 and code "contract_conflict"
    And the registered email contract is version "1" still, with its first fingerprint

    Examples:
      | change                                           |
      | an added effect audit_write                      |
      | no authority requirement                         |
      | an added authority requirement on the recipients |
      | the approver role treasurer                      |
      | deduplication by destination key                 |

  @req:agl.contract.legacy-not-protected @profile:agl-core @fixture:agl-core
  Scenario Outline: A legacy handler cannot register as a protected operation, and still serves legacy workflows
    When the operator registers a contract "mail.legacy_send" whose implementation is the legacy tool "legacy.echo" <how>
    Then the registration is refused
    And no contract named "mail.legacy_send" is registered
    When the caller asks the legacy entry point to run "legacy.echo"
    Then the legacy entry point answered with the arguments it was given

    Examples:
      | how                                             |
      | requiring approval                              |
      | without approval                                |
      | quoting the email implementation's fingerprint  |

  @req:agl.contract.field-set-validated @profile:agl-core @fixture:agl-core
  Scenario Outline: A contract with any field outside its domain is not registered
    When the operator registers the email contract as "mail.defective" with <defect>
    Then the registration is refused
    And no contract named "mail.defective" is registered

    Examples:
      | defect                                                      |
      | no contract version                                         |
      | an implementation the host does not have                    |
      | an input type that is not an object                         |
      | an output type using a keyword outside the type language    |
      | an authority requirement without a selector                 |
      | possible effects that omit email_send                       |
      | a precondition that the draft is a Draft                    |
      | success returning the draft to Authorized                   |
      | no approval required                                        |
      | an idempotency kind exactly_once                            |
      | a retry selector naming a failure kind that does not exist  |
