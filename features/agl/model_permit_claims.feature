# agl-behavioral-contracts.txt §6.3 (a permit is consumed once), §8 (the
# dispatcher claims it) and §11 (the claim is one transaction), checked as a
# concurrent history: several clients dispatch one approved send and read its
# permit at once, and the history must be linearizable against the
# sequential model of one permit (models/permits, porcupine; docs/models.md).
Feature: Concurrent dispatches and reads of one permit are linearizable
  A claim takes effect at one instant. Whatever the clients' calls overlap,
  there must be one order of them, each between its call and its answer, in
  which one dispatch claims the permit, the others are refused as a claimed
  permit, and no read says unconsumed once the claim has been answered.

  Background:
    Given an AGL host with a fake email destination the suite counts
    And a principal whose agent may use the email and transfer operations under a grant from the authorization service

  @req:agl.model.permit-claims @profile:agl-core @fixture:agl-core
  Scenario Outline: Clients at once dispatch one approved send and read its permit
    Given the principal has an approved send of a draft to "bob@example.com"
    When <clients> clients at once dispatch the approved send and read its permit, their calls recorded
    Then the history of dispatches and permit reads is linearizable against the model of one permit
    And the destination received exactly one message

    Examples:
      | clients |
      | 4       |
      | 8       |
