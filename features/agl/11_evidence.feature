# agl-behavioral-contracts.txt §11 Observable evidence obligations and §13
# Stage 3 (with §4.3, §5 and §12): a question with a revision, receipts of
# evidence collected from sources, a report, attestations by trusted
# validators, review and publication (docs/agl-binding.md §13,
# docs/hosts/agl.md §17). The suite serves the sources and signs as the
# validators; the host's configuration lists the validators it trusts.
@fixture:agl-evidence
Feature: Evidence obligations
  Gathering evidence moves a question through collected evidence, a
  validator's judgment against its policy and a reviewed report to a
  publication, each step bound to the exact content and revision it is
  about, and none of them claiming more than the validator judged.

  Background:
    Given an AGL host that collects evidence and trusts the validators "policy-checker" and "llm-reviewer"

  @req:agl.evidence.receipt-records-provenance @profile:agl-evidence
  Scenario Outline: A receipt records the source, the digest of what it served, when, and the question and revision
    Given the source serves "<doc>" with the content "<content>"
    And a question is opened
    When the host collects "<doc>" for the question's current revision
    Then the receipt records the source of "<doc>", the digest of "<content>", when it was retrieved, and the question and its revision

    Examples:
      | doc         | content                                   |
      | annual.txt  | revenue grew 4% in 2025                   |
      | minutes.pdf | the board approved the merger on 3 March  |

  @req:agl.evidence.receipt-records-provenance @profile:agl-evidence
  Scenario: A receipt for a revised question names the revision it was collected for
    Given the source serves "annual.txt" with the content "revenue grew 4% in 2025"
    And a question is opened
    When the question is revised
    And the host collects "annual.txt" for the question's current revision
    Then the receipt records the source of "annual.txt", the digest of "revenue grew 4% in 2025", when it was retrieved, and the question and its revision

  @req:agl.evidence.changed-content-caught-by-digest @profile:agl-evidence
  Scenario: Content the source changed after collection is told apart by its digest, and an attestation of the old content does not stand for the new
    Given the source serves "annual.txt" with the content "revenue grew 4% in 2025"
    And a question is opened
    And "annual.txt" is collected as receipt "first"
    When the source changes "annual.txt" to the content "revenue fell 2% in 2025"
    And the host collects "annual.txt" for the question's current revision as receipt "second"
    Then receipt "second" records the digest of "annual.txt" with the content "revenue fell 2% in 2025", unlike receipt "first"
    Given report "r" citing "second" is drafted and reviewed
    When the validator attests report "r" having inspected the content first collected from its source
    Then the action is refused with status 409, code "evidence_mismatch" and category "proposal_mismatch"

  @req:agl.evidence.other-question-refused @profile:agl-evidence
  Scenario: A report cannot cite evidence collected for another question
    Given the source serves "annual.txt" with the content "revenue grew 4% in 2025"
    And a question "one" is opened
    And a question "two" is opened
    And "annual.txt" is collected for question "two" as receipt "theirs"
    When report "r" on question "one" citing "theirs" is drafted
    Then the action is refused with status 409, code "other_question" and category "invalid_protocol_state"

  @req:agl.evidence.older-revision-refused @profile:agl-evidence
  Scenario: Evidence is not collected for a revision the question has left
    Given the source serves "annual.txt" with the content "revenue grew 4% in 2025"
    And a question is opened
    When the question is revised
    And the host collects "annual.txt" for revision 1 of the question
    Then the action is refused with status 409, code "stale_revision" and category "stale_revision"

  @req:agl.evidence.older-revision-refused @profile:agl-evidence
  Scenario: A report on the current revision cannot cite evidence collected for an older one
    Given the source serves "annual.txt" with the content "revenue grew 4% in 2025"
    And a question is opened
    And "annual.txt" is collected as receipt "old"
    When the question is revised
    And report "r" citing "old" is drafted at revision 2 of the question
    Then the action is refused with status 409, code "stale_revision" and category "stale_revision"

  @req:agl.evidence.older-revision-refused @profile:agl-evidence
  Scenario: A report on a revision the question has since left is not published
    Given the source serves "annual.txt" with the content "revenue grew 4% in 2025"
    And a question is opened
    And "annual.txt" is collected as receipt "old"
    And report "r" citing "old" is drafted and reviewed
    And the validator "policy-checker" attests that report "r" passes policy "sources-cited"
    When the question is revised
    And report "r" is published with its attestation
    Then the action is refused with status 409, code "stale_revision" and category "stale_revision"
    And report "r" was not published

  @req:agl.evidence.publication-needs-attestation @profile:agl-evidence
  Scenario: A reviewed report is not published without an attestation
    Given the source serves "annual.txt" with the content "revenue grew 4% in 2025"
    And a question is opened
    And "annual.txt" is collected as receipt "a"
    And report "r" citing "a" is drafted and reviewed
    When report "r" is published without an attestation
    Then the action is refused with status 409, code "attestation_required" and category "invalid_protocol_state"
    And report "r" was not published

  @req:agl.evidence.publication-needs-attestation @profile:agl-evidence
  Scenario: A validator's failing judgment does not let a report be published, a passing one does
    Given the source serves "annual.txt" with the content "revenue grew 4% in 2025"
    And a question is opened
    And "annual.txt" is collected as receipt "a"
    And report "r" citing "a" is drafted and reviewed
    And the validator "policy-checker" attests that report "r" fails policy "sources-cited"
    When report "r" is published with its attestation
    Then the action is refused with status 409, code "attestation_required" and category "invalid_protocol_state"
    And report "r" was not published
    Given the validator "policy-checker" attests that report "r" passes policy "sources-cited"
    When report "r" is published with its attestation
    Then report "r" is published, bound to its report digest and its attestation

  @req:agl.evidence.attestation-bound-to-report-digest @profile:agl-evidence
  Scenario: An attestation of one report is refused for another
    Given the source serves "annual.txt" with the content "revenue grew 4% in 2025"
    And a question is opened
    And "annual.txt" is collected as receipt "a"
    And report "mine" citing "a" is drafted and reviewed
    And report "other" citing "a" is drafted and reviewed
    When the validator's attestation that report "other" passes is presented for report "mine"
    Then the action is refused with status 409, code "attestation_unbound" and category "proposal_mismatch"

  @req:agl.evidence.attestation-bound-to-report-digest @profile:agl-evidence
  Scenario: A report is not published on the attestation of another report
    Given the source serves "annual.txt" with the content "revenue grew 4% in 2025"
    And a question is opened
    And "annual.txt" is collected as receipt "a"
    And report "mine" citing "a" is drafted and reviewed
    And report "other" citing "a" is drafted and reviewed
    And the validator "policy-checker" attests that report "other" passes policy "sources-cited"
    When report "mine" is published with the attestation of report "other"
    Then the action is refused with status 409, code "attestation_unbound" and category "proposal_mismatch"
    And report "mine" was not published

  @req:agl.evidence.untrusted-validator-refused @profile:agl-evidence
  Scenario Outline: An attestation no trusted validator signed is refused
    Given the source serves "annual.txt" with the content "revenue grew 4% in 2025"
    And a question is opened
    And "annual.txt" is collected as receipt "a"
    And report "r" citing "a" is drafted and reviewed
    When an attestation that report "r" passes is signed by <signer>
    Then the action is refused with status 403, code "untrusted_validator" and category "authorization_denied"

    Examples:
      | signer                                           |
      | a key the host does not list                     |
      | the trusted validator and changed after signing  |

  @req:agl.evidence.attestation-records-judgment @profile:agl-evidence
  Scenario Outline: The host records what the validator judged: its policy and version, the evidence inspected, the report digest and the result
    Given the source serves "annual.txt" with the content "revenue grew 4% in 2025"
    And the source serves "minutes.pdf" with the content "the board approved the merger"
    And a question is opened
    And "annual.txt" is collected as receipt "a"
    And "minutes.pdf" is collected as receipt "b"
    And report "r" citing "<cited>" is drafted and reviewed
    When the validator "policy-checker", stating its method as "deterministic", attests that report "r" passes policy "<policy>"
    Then the host records the attestation as a judgment of "policy-checker" of kind "deterministic" under policy "<policy>", naming the evidence inspected, the report digest and the result "pass"

    Examples:
      | cited | policy                 |
      | a     | sources-cited          |
      | a,b   | two-independent-sources |

  @req:agl.evidence.judgment-not-verified @profile:agl-evidence
  Scenario Outline: A published report carries the validator's judgment, never a universal verified
    Given the source serves "annual.txt" with the content "revenue grew 4% in 2025"
    And a question is opened
    And "annual.txt" is collected as receipt "a"
    And report "r" citing "a" is drafted and reviewed
    And the validator "<validator>" attests that report "r" passes policy "<policy>"
    When report "r" is published with its attestation
    Then report "r" is published, bound to its report digest and its attestation
    And the publication of report "r" records the validator's result as a judgment naming "<validator>", policy "<policy>" and its version
    And no answer about the question, its receipts, reports, attestations or publication claims "verified"

    Examples:
      | validator      | policy          |
      | policy-checker | sources-cited   |
      | llm-reviewer   | claims-grounded |

  @req:agl.evidence.llm-validator-labelled @profile:agl-evidence
  Scenario Outline: An LLM-backed validator's result is labelled as such, whatever its statement says of itself
    Given the source serves "annual.txt" with the content "revenue grew 4% in 2025"
    And a question is opened
    And "annual.txt" is collected as receipt "a"
    And report "r" citing "a" is drafted and reviewed
    When the validator "<validator>", stating its method as "<claimed>", attests that report "r" passes policy "claims-grounded"
    Then the host records the attestation as a judgment of "<validator>" of kind "<kind>" under policy "claims-grounded", naming the evidence inspected, the report digest and the result "pass"
    When report "r" is published with its attestation
    Then the publication of report "r" labels its judgment as made by "<validator>" of kind "<kind>"

    Examples:
      | validator      | claimed       | kind          |
      | llm-reviewer   | llm           | llm           |
      | llm-reviewer   | deterministic | llm           |
      | policy-checker | deterministic | deterministic |

  @req:agl.evidence.audit-references-no-secrets @profile:agl-evidence
  Scenario: The evidence audit trail references receipts by id and digest, and never the source's credential
    Given the source serves "annual.txt" with the content "revenue grew 4% in 2025"
    And a question is opened
    And "annual.txt" is collected as receipt "a"
    And report "r" citing "a" is drafted and reviewed
    And the validator "policy-checker" attests that report "r" passes policy "sources-cited"
    When report "r" is published with its attestation
    Then the audit trail of the evidence records the receipt of "a" and its content digest, and neither the source's credential nor the secret in its address
