# agl-behavioral-contracts.txt §6.3 (the claim checks the resource revision
# and state in its transaction), §8 (the OperationStore claims and advances
# resource revisions atomically) and §9 (a runtime compare-and-swap on the
# resource revision prevents concurrent transitions), checked as a
# concurrent history: several clients read one draft and at once make
# transitions from the revision they read (the dispatch of its permit,
# edits, proposals), and the history must be linearizable against the
# sequential model of one resource (models/revisions, porcupine;
# docs/models.md).
Feature: Concurrent transitions and reads of one resource revision are linearizable
  Of the transitions that start from one revision at most one takes
  effect. Whatever the clients' calls overlap, there must be one order of
  them, each between its call and its answer, in which one transition per
  revision succeeds, the others are refused as a stale revision or a state
  that no longer allows them, and every read says the revision and state
  the transitions before it left.

  Background:
    Given an AGL host with a fake email destination the suite counts
    And a principal whose agent may use the email and transfer operations under a grant from the authorization service

  @req:agl.model.revision-swaps @profile:agl-core @fixture:agl-core
  Scenario Outline: Clients at once swap the revision of an approved send's draft while reading it
    Given the AGL test seams are enabled
    And the principal has an approved send of a draft to "bob@example.com"
    When <clients> clients at once, over 3 rounds, read the approved send's draft and swap its revision, their calls recorded
    Then the history of the draft's transitions and reads is linearizable against the model of one resource

    Examples:
      | clients |
      | 4       |
      | 6       |
