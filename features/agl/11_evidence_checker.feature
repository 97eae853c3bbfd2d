# agl-behavioral-contracts.txt §11 and §13 Stage 3: the checker proves the
# receipts and attestations a publication needs are present and bound,
# with the evidence expressed in the same resource model (protocols and
# operations of agl-workflow/1, docs/agl-binding.md §11 and §13). Rows name
# fixtures of scenarios/agl-checker/evidence.
@fixture:agl-core
Feature: The checker holds publication to its evidence obligations
  A workflow publishes a report only from a reviewed report and evidence a
  validator checked against its policy; one that skips collection, the
  attestation or the review, or writes an attestation into itself, does
  not check.

  Background:
    Given an AGL host with a workflow checker

  @req:agl.evidence.checker-publication-obligations @profile:agl-checker
  Scenario: A workflow that collects, has the evidence checked, reviews and then publishes is certified
    When the checker checks the workflow "evidence/collect-check-review-publish"
    Then the checker certifies it with effect bound "external_write, network_read" and resources after "q: question Unresearched"

  @req:agl.evidence.checker-publication-obligations @profile:agl-checker
  Scenario Outline: A workflow that publishes without the receipts and attestation it needs is rejected
    When the checker checks the workflow "<workflow>"
    Then the checker rejects it with "<code>" at <span>

    Examples:
      | workflow                                | code      | span        |
      | evidence/publish-unchecked-evidence     | AGL-E0201 | 18:51-18:52 |
      | evidence/publish-without-evidence       | AGL-E0110 | 17:1-17:56  |
      | evidence/publish-forged-attestation     | AGL-E0501 | 17:51-17:73 |
      | evidence/publish-unreviewed             | AGL-E0201 | 17:31-17:32 |
