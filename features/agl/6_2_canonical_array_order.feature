# agl-behavioral-contracts.txt §6.2 Canonicalization and authenticity:
# the canonical encoding keeps array order, so the approval digest binds
# the order of, for example, an email's recipients.
Feature: Array order in the approved snapshot
  Canonicalization sorts object keys and keeps array order: two actions
  whose lists hold the same items in another order are different actions,
  and the digest an approval binds tells them apart.

  Background:
    Given an AGL host with a fake email destination the suite counts
    And a principal whose agent may use the email and transfer operations under a grant from the authorization service

  @req:agl.canon.array-order-kept @profile:agl-core @fixture:agl-core
  Scenario Outline: The snapshot and its digest keep the recipients in the order drafted
    Given the principal drafts an email to "<recipients>", in that order
    When the agent proposes sending the draft
    Then the proposal's snapshot lists the recipients "<recipients>" in that order
    And the proposal's canonical encoding is the suite's own agl-canon/1 encoding of its snapshot
    And the proposal's digest is the SHA-256 of its canonical encoding
    And the proposal's digest is not that of its snapshot with the recipients sorted

    Examples:
      | recipients                                            |
      | carol@example.com, bob@example.com, alice@example.com |
      | bob@example.com, carol@example.com, alice@example.com |
