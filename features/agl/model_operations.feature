# agl-behavioral-contracts.txt §6.3 (rejection, expiry or revocation stops a
# new dispatch; a dispatched action stays dispatched), §7 (the dispatcher's
# steps; a charge is not refunded for an unsuccessful result), §8 (the
# operation lifecycle; an uncertain write waits for reconciliation and is
# never blindly retried) and §9 (admission budgets), checked as seeded
# random sequences against the sequential model of permits and operations
# (models/operations, docs/models.md), shrunk to a minimal sequence on a
# disagreement.
Feature: Sequences of approvals, dispatches, revocations and reconciliations agree with the model of operations
  A hand-written scenario is one order of these operations. The model draws
  many: every answer must be one the model allows, and the destination must
  see exactly the effects the model counts, whatever came before.

  Background:
    Given an AGL host with a fake email destination the suite counts
    And a principal whose agent may use the email and transfer operations under a grant from the authorization service

  @req:agl.model.operations @profile:agl-core @fixture:agl-core
  Scenario: Seeded random sequences of operations on one execution agree with the model
    When the suite runs seeded random sequences of proposals, approvals, dispatches, revocations and reconciliations against the model of operations
    Then every answer agreed with the model of permits and operations
