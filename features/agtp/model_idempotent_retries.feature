# agtp-rcns.txt, "Headers and Rate Limiting": the idempotency cache is
# scoped by (Agent-ID, Idempotency-Key); a replay of the same key from the
# same agent receives the cached response, the same key from another agent
# is an independent request. Checked as a concurrent history: several
# connections at once send the same keyed request (and some with another
# key, or another agent), and the history must be linearizable against the
# sequential model of the cache (models/idempotency, porcupine;
# docs/models.md).
Feature: Keyed requests sent at once over several connections are linearizable against the idempotency cache
  However the requests of one agent and key overlap, and over whichever
  connections they come, there must be one order of them, each between its
  call and its answer, in which the first is executed (a contract of its
  own) and every other gets exactly its response; another key, or another
  agent's same key, is a request of its own.

  @req:agtp.model.idempotent-retries @profile:agtp-rcns
  Scenario Outline: Connections at once send one agent's keyed request, and others [<mode>, <transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets mode = "<mode>"
    And its [policies.rcns] leaves rate_limit_per_minute unset
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "bob" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When connections at once send keyed gate requests of "alice" and "bob", most of them with one Idempotency-Key, their calls recorded
    Then the history of keyed requests is linearizable against the model of the idempotency cache

    @fixture:agtp-confirm-first
    Examples: confirm-first
      | mode          | transport          |
      | confirm-first | TLS 1.3            |

    @fixture:agtp-optimistic
    Examples: optimistic
      | mode       | transport          |
      | optimistic | plaintext loopback |
