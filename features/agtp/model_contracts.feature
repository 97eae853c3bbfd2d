# agtp-rcns.txt, "Tier C Resolution", "The Four-Lock Dispatcher Gate",
# "Delivery Modes", "Contract Scoping and Lifecycle" and "Headers and Rate
# Limiting", with agtp-wire-notes.md §3 and §7, driven as seeded random
# sequences against an executable model (models/contracts; docs/models.md).
# The model moves the host's clock through the clock seam (a host without
# it runs the sequences without expiry), so the scenario takes its host
# alone; each sequence leases two fresh negotiators and two fresh rooms, so
# no sequence sees another's contracts or gate budget.
@exclusive
Feature: Contracts agree with their model under any sequence of gate requests, presentations, releases, revocations, replays and expiry
  Every hand-written scenario is one order of operations someone thought
  of. Here the suite draws sequences: two negotiators ask for rooms through
  the gate (and a tier-3 agent, an agent without rcns:negotiate and a claim
  leaving it out are refused by their lock), present their own and each
  other's contracts and ids never issued, send plain requests the resolver
  answers, release with SUSPEND, revoke with REVOKE (as the originator,
  another agent or an operator), replay an Idempotency-Key, and move the
  clock past every contract's lifetime. Every answer is checked against the
  model, and a failing sequence is shrunk to a minimal one.

  @req:agtp.model.contracts @profile:agtp-rcns
  Scenario Outline: Random sequences of contract operations agree with the model [<mode>, <transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets mode = "<mode>"
    And its [policies.rcns] sets min_trust_tier = 2
    And its [policies.rcns] sets rate_limit_per_minute = 6
    And the scenario has its host alone, since the model moves the host's clock through its clock seam when it has one
    And agent "tier" has trust tier 3 and is granted "rooms:*, rcns:negotiate"
    And agent "rooms" has trust tier 1 and is granted "rooms:*"
    And agent "ops" has trust tier 1 and is granted "inspect:all"
    When the suite runs seeded random sequences of contract operations against the model, two fresh negotiators each
    Then every answer agreed with the model of contracts

    @fixture:agtp-model
    Examples: confirm-first
      | mode          | transport          |
      | confirm-first | TLS 1.3            |
      | confirm-first | plaintext loopback |

    @fixture:agtp-model-optimistic
    Examples: optimistic
      | mode       | transport          |
      | optimistic | TLS 1.3            |
      | optimistic | plaintext loopback |
