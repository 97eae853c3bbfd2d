# agl-behavioral-contracts.txt §13 Delivery and acceptance (with §6.3 and §8):
# real SQLite concurrency across two hosts sharing one operation store.
# On the in-process refhost target the two hosts are two host instances with
# their own store connections in one OS process; the refhost's Go test
# TestTwoProcessSinglePermitClaim runs the same race across two OS processes
# for 1,000 trials (docs/interpretations.md).
@fixture:agl-core
Feature: Cross-process claims on one operation store
  A permit claim is one transaction in the shared store, so hosts that
  share it cannot both claim one permit, and the destination sees one
  effect.

  Background:
    Given an AGL host with a fake email destination the suite counts
    And a second AGL host shares the first host's operation store
    And a principal whose agent may use the email and transfer operations under a grant from the authorization service

  @req:agl.dispatch.permit.single-claim-cross-process @profile:agl-operation-store
  Scenario: Contended dispatches of one permit at two hosts yield one claim and one effect
    Given the two hosts are distinct instances on one operation store
    When the principal has an approved send of a draft to "bob@example.com"
    And the hosts hold the next 8 claimers until all have arrived
    And the agent dispatches the approved send at both hosts at once, 4 times each
    Then exactly one dispatch completed and every other was refused as a claimed permit
    And the destination received exactly one message

  @req:agl.dispatch.permit.single-claim-cross-process @profile:agl-operation-store
  Scenario: A permit used at one host is refused at the other
    Given the principal has an approved send of a draft to "bob@example.com"
    When the agent dispatches the approved send
    Then the dispatch completed
    When the agent dispatches the approved send at the second host
    Then the action is refused with status 409, code "permit_consumed" and category "permit_claimed"
    And the destination received exactly one message
