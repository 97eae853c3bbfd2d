# agtp-rcns.txt, "Stale Contract Sweep" and the REVOKE
# target=stale-contracts parameters. The operator edits policy through the
# host's recipe seam (docs/host-interface.md). Each scenario edits or
# removes only a recipe of its own, leased from the fixture's recipe roster:
# a copy of room-booking (version 1, composing store-room and count-booking,
# answering 201) under a name and a path of its own (/{booking}/{id});
# version 2 composes store-room-v2 and answers 202. A sweep still reads every
# contract on the host, so every scenario here takes its host alone, and
# asserts only on the contracts it obtained itself (the report may list
# other scenarios' contracts, an earlier invalidate may have evicted them).
@exclusive
Feature: Stale contract sweep
  The operator fires REVOKE target=stale-contracts after editing recipes.
  Grandfather reports drift and leaves contracts running; invalidate evicts
  drifted contracts, records why, and the evicted synthesis_id is 404.
  Passthrough contracts are skipped and a removed recipe is drift with a
  null current version. Only an inspect:all holder may sweep.

  @req:agtp.rcns.sweep.grandfather-reports @profile:agtp-rcns
  Scenario Outline: Grandfather reports a drifted contract and leaves it serving [<transport>]
    Given an AGTP server reached over <transport>
    And the operator's recipe seam is available
    And its [policies.rcns] sets enabled = true
    And recipe "booking" is its own copy of room-booking, for BOOK /{booking}/{id}
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "ops" has trust tier 1 and is granted "inspect:all"
    And "alice" holds an active contract for BOOK /{booking}/{room}
    When the operator edits recipe "booking" to version "2", which composes store-room-v2 and answers 202
    And "ops" sends REVOKE target=stale-contracts mode=grandfather actor=ops-console
    Then the sweep reports the contract as grandfathered
    When "alice" sends BOOK /{booking}/{room} presenting the contract
    Then the response is served under the contract

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.sweep.unchanged-kept @profile:agtp-rcns
  Scenario Outline: A contract on the current recipe version is left alone, even by invalidate [<transport>]
    Given an AGTP server reached over <transport>
    And the operator's recipe seam is available
    And its [policies.rcns] sets enabled = true
    And recipe "booking" is its own copy of room-booking, for BOOK /{booking}/{id}
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "ops" has trust tier 1 and is granted "inspect:all"
    And "alice" holds an active contract for BOOK /{booking}/{room} remembered as "old"
    When the operator edits recipe "booking" to version "2", which composes store-room-v2 and answers 202
    And "alice" holds an active contract for BOOK /{booking}/{room2} remembered as "new"
    And "ops" sends REVOKE target=stale-contracts mode=invalidate actor=ops-console
    Then the sweep reports contract "new" as unchanged
    When "alice" sends BOOK /{booking}/{room2} presenting contract "new"
    Then the response is served under contract "new"

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.sweep.invalidate-evicts-404 @profile:agtp-rcns
  Scenario Outline: Invalidate evicts a drifted contract and its synthesis_id becomes 404 [<transport>]
    Given an AGTP server reached over <transport>
    And the operator's recipe seam is available
    And its [policies.rcns] sets enabled = true
    And recipe "booking" is its own copy of room-booking, for BOOK /{booking}/{id}
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "ops" has trust tier 1 and is granted "inspect:all"
    And "alice" holds an active contract for BOOK /{booking}/{room}
    When the operator edits recipe "booking" to version "2", which composes store-room-v2 and answers 202
    And "ops" sends REVOKE target=stale-contracts mode=invalidate actor=ops-console
    Then the sweep reports the contract as evicted
    When "alice" sends BOOK /{booking}/{room} presenting the contract
    Then the response status is 404

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.sweep.invalidation-event @profile:agtp-rcns
  Scenario Outline: An invalidation is an rcns_release event naming the reason and the operator [<transport>]
    Given an AGTP server reached over <transport>
    And the operator's recipe seam is available
    And its [policies.rcns] sets enabled = true
    And recipe "booking" is its own copy of room-booking, for BOOK /{booking}/{id}
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "ops" has trust tier 1 and is granted "inspect:all"
    And "alice" holds an active contract for BOOK /{booking}/{room}
    When the operator edits recipe "booking" to version "2", which composes store-room-v2 and answers 202
    And "ops" sends REVOKE target=stale-contracts mode=invalidate actor=ops-console
    Then the request succeeded
    When "alice" reads its lifecycle stream
    Then the lifecycle stream has an rcns_release event for the contract with reason "policy-change-invalidation" and actor "ops-console"

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.sweep.passthrough-skipped @profile:agtp-rcns
  Scenario Outline: A passthrough contract is skipped by an invalidate sweep [<transport>]
    Given an AGTP server reached over <transport>
    And the operator's recipe seam is available
    And its [policies.rcns] sets enabled = true
    And recipe "booking" is its own copy of room-booking, for BOOK /{booking}/{id}
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "ops" has trust tier 1 and is granted "inspect:all"
    And "alice" holds an active contract for BOOK /{booking}/{room} remembered as "drifted"
    And "alice" holds an active contract for SCHEDULE /slot/{slot}
    When the operator edits recipe "booking" to version "2", which composes store-room-v2 and answers 202
    And "ops" sends REVOKE target=stale-contracts mode=invalidate actor=ops-console
    Then the sweep reports contract "drifted" as evicted
    And the sweep reports the contract as neither grandfathered nor evicted
    When "alice" sends SCHEDULE /slot/{slot} presenting the contract
    Then the response is served under the contract

    @fixture:agtp-confirm-first
    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.sweep.removed-recipe-null @profile:agtp-rcns
  Scenario Outline: A removed recipe is drift with current_version null (<mode>) [<transport>]
    Given an AGTP server reached over <transport>
    And the operator's recipe seam is available
    And its [policies.rcns] sets enabled = true
    And recipe "booking" is its own copy of room-booking, for BOOK /{booking}/{id}
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "ops" has trust tier 1 and is granted "inspect:all"
    And "alice" holds an active contract for BOOK /{booking}/{room}
    When the operator removes recipe "booking"
    And "ops" sends REVOKE target=stale-contracts mode=<mode> actor=ops-console
    Then the sweep reports the contract as <disposition>
    And the sweep reports the contract with current_version null

    @fixture:agtp-confirm-first
    Examples:
      | mode        | disposition   | transport          |
      | invalidate  | evicted       | TLS 1.3            |
      | invalidate  | evicted       | plaintext loopback |
      | grandfather | grandfathered | TLS 1.3            |
      | grandfather | grandfathered | plaintext loopback |

  # The text requires inspect:all and names no status for its absence: any
  # 4xx (or 262, granted but not claimed) refuses the sweep, and the drifted
  # contract an invalidating sweep would evict still serves. The statuses
  # parley's own hosts answer are the binding id below.
  @req:agtp.rcns.sweep.requires-inspect-all @profile:agtp-rcns
  Scenario Outline: An agent without inspect:all in its claim cannot fire the sweep (<role>) [<transport>]
    Given an AGTP server reached over <transport>
    And the operator's recipe seam is available
    And its [policies.rcns] sets enabled = true
    And recipe "booking" is its own copy of room-booking, for BOOK /{booking}/{id}
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "bob" has trust tier 1 and is granted "<grant>"
    And "alice" holds an active contract for BOOK /{booking}/{room}
    When the operator edits recipe "booking" to version "2", which composes store-room-v2 and answers 202
    And "<who>" sends REVOKE target=stale-contracts mode=invalidate actor=<who> <claim>
    Then the response refuses the sweep
    When "alice" sends BOOK /{booking}/{room} presenting the contract
    Then the response is served under the contract

    @fixture:agtp-confirm-first
    Examples:
      | role                                   | who   | grant                   | claim                 | transport          |
      | the contract's originator              | alice | rooms:read              |                       | TLS 1.3            |
      | the contract's originator              | alice | rooms:read              |                       | plaintext loopback |
      | another agent                          | bob   | rooms:*, rcns:negotiate |                       | TLS 1.3            |
      | another agent granted but not claiming | bob   | rooms:*, inspect:all    | claiming "rooms:read" | plaintext loopback |

  # parley's binding: the sweep's scope refusal follows the obtainability
  # rule the gate uses for rcns:negotiate (455 scope-exceeded when the
  # identity document lacks inspect:all, 262 scope-required when it grants
  # it unclaimed), naming the scope.
  @req:agtp.rcns.sweep.inspect-all-refusal-status @profile:agtp-parley-binding
  Scenario Outline: A sweep refused for want of inspect:all answers the obtainability rule's status (<role>) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "bob" has trust tier 1 and is granted "<grant>"
    When "bob" sends REVOKE target=stale-contracts mode=grandfather actor=bob <claim>
    Then the response status is <answer> naming scope inspect:all

    @fixture:agtp-confirm-first
    Examples:
      | role                      | grant                   | claim                 | answer                         | transport          |
      | not granted               | rooms:*, rcns:negotiate |                       | 455 with reason scope-exceeded | TLS 1.3            |
      | not granted               | rooms:read              |                       | 455 with reason scope-exceeded | plaintext loopback |
      | granted but not claiming  | rooms:*, inspect:all    | claiming "rooms:read" | 262 with reason scope-required | TLS 1.3            |
      | granted but not claiming  | rooms:*, inspect:all    | claiming "rooms:read" | 262 with reason scope-required | plaintext loopback |

  @req:agtp.rcns.sweep.default-mode @profile:agtp-rcns
  Scenario Outline: A sweep without a mode follows on_policy_change (<setting>) [<transport>]
    Given an AGTP server reached over <transport>
    And the operator's recipe seam is available
    And its [policies.rcns] sets enabled = true
    And recipe "booking" is its own copy of room-booking, for BOOK /{booking}/{id}
    And <setting>
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "ops" has trust tier 1 and is granted "inspect:all"
    And "alice" holds an active contract for BOOK /{booking}/{room}
    When the operator edits recipe "booking" to version "2", which composes store-room-v2 and answers 202
    And "ops" sends REVOKE target=stale-contracts actor=ops-console
    Then the sweep reports the contract as <disposition>

    @fixture:agtp-confirm-first
    Examples:
      | setting                                                     | disposition   | transport          |
      | its [policies.rcns] leaves on_policy_change unset           | grandfathered | TLS 1.3            |
      | its [policies.rcns] leaves on_policy_change unset           | grandfathered | plaintext loopback |

    @fixture:agtp-optimistic
    Examples:
      | setting                                                     | disposition   | transport          |
      | its [policies.rcns] sets on_policy_change = "invalidate"    | evicted       | TLS 1.3            |
      | its [policies.rcns] sets on_policy_change = "invalidate"    | evicted       | plaintext loopback |

  # A version is an opaque string compared for equality only: any other
  # string is drift, whatever order or number it suggests.
  @req:agtp.rcns.sweep.grandfather-reports @profile:agtp-rcns
  Scenario Outline: Any other version string is drift ("<from>" to "<to>") [<transport>]
    Given an AGTP server reached over <transport>
    And the operator's recipe seam is available
    And its [policies.rcns] sets enabled = true
    And recipe "booking" is its own copy of room-booking, for BOOK /{booking}/{id}
    And the operator edits recipe "booking" to version "<from>", which composes store-room, count-booking and answers 201
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "ops" has trust tier 1 and is granted "inspect:all"
    And "alice" holds an active contract for BOOK /{booking}/{room}
    When the operator edits recipe "booking" to version "<to>", which composes store-room-v2 and answers 202
    And "ops" sends REVOKE target=stale-contracts mode=grandfather actor=ops-console
    Then the sweep reports the contract as grandfathered
    When "alice" sends BOOK /{booking}/{room} presenting the contract
    Then the response is served under the contract
    And the response status is 201

    @fixture:agtp-confirm-first
    Examples:
      | from       | to         | transport          |
      | 10         | 9          | TLS 1.3            |
      | 1.0        | 1          | plaintext loopback |
      | v1.10.0    | v1.9.0     | TLS 1.3            |
      | 2026-03-01 | 2026-02-28 | plaintext loopback |

  @req:agtp.rcns.sweep.unchanged-kept @profile:agtp-rcns
  Scenario Outline: The same version string is no drift, even when the recipe's composition changed ("<version>") [<transport>]
    Given an AGTP server reached over <transport>
    And the operator's recipe seam is available
    And its [policies.rcns] sets enabled = true
    And recipe "booking" is its own copy of room-booking, for BOOK /{booking}/{id}
    And the operator edits recipe "booking" to version "<version>", which composes store-room, count-booking and answers 201
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "ops" has trust tier 1 and is granted "inspect:all"
    And "alice" holds an active contract for BOOK /{booking}/{room}
    When the operator edits recipe "booking" to version "<version>", which composes store-room-v2 and answers 202
    And "ops" sends REVOKE target=stale-contracts mode=invalidate actor=ops-console
    Then the sweep reports the contract as unchanged
    When "alice" sends BOOK /{booking}/{room} presenting the contract
    Then the response is served under the contract

    @fixture:agtp-confirm-first
    Examples:
      | version | transport          |
      | 3       | TLS 1.3            |
      | v2.0.1  | plaintext loopback |

  # The report lists every contract the sweep examined, not a sample: two
  # drifted contracts of one agent on one recipe, another agent's on the same
  # recipe, and a contract on a second recipe that was not edited, each with
  # its own disposition.
  @req:agtp.rcns.sweep.report-lists-every-contract @profile:agtp-rcns
  Scenario Outline: The sweep report lists every contract it examined with its disposition (<mode>) [<transport>]
    Given an AGTP server reached over <transport>
    And the operator's recipe seam is available
    And its [policies.rcns] sets enabled = true
    And recipe "booking" is its own copy of room-booking, for BOOK /{booking}/{id}
    And recipe "lodging" is its own copy of room-booking, for BOOK /{lodging}/{id}
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "bob" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And agent "ops" has trust tier 1 and is granted "inspect:all"
    And "alice" holds an active contract for BOOK /{booking}/{room} remembered as "first"
    And "alice" holds an active contract for BOOK /{booking}/{room2} remembered as "second"
    And "bob" holds an active contract for BOOK /{booking}/{room} remembered as "theirs"
    And "alice" holds an active contract for BOOK /{lodging}/{room} remembered as "current"
    When the operator edits recipe "booking" to version "2", which composes store-room-v2 and answers 202
    And "ops" sends REVOKE target=stale-contracts mode=<mode> actor=ops-console
    Then the sweep reports contract "first" as <disposition>
    And the sweep reports contract "second" as <disposition>
    And the sweep reports contract "theirs" as <disposition>
    And the sweep reports contract "current" as unchanged

    @fixture:agtp-confirm-first
    Examples:
      | mode        | disposition   | transport          |
      | grandfather | grandfathered | TLS 1.3            |
      | invalidate  | evicted       | plaintext loopback |

    @fixture:agtp-optimistic
    Examples:
      | mode        | disposition   | transport          |
      | invalidate  | evicted       | TLS 1.3            |
      | grandfather | grandfathered | plaintext loopback |

  # The sweep is operator-fired: on_policy_change = invalidate sets what a
  # sweep does, and a recipe edit alone evicts nothing. The contract was
  # synthesized under the recipe's first version; after the edit it is still
  # its originator's, and serves.
  @req:agtp.rcns.sweep.edit-harmless-until-sweep @profile:agtp-rcns
  Scenario Outline: Under on_policy_change = invalidate a recipe edit alone leaves a live contract serving (<how>) [<transport>]
    Given an AGTP server reached over <transport>
    And the operator's recipe seam is available
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets on_policy_change = "invalidate"
    And recipe "booking" is its own copy of room-booking, for BOOK /{booking}/{id}
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And <obtains>
    When the operator edits recipe "booking" to version "2", which composes store-room-v2 and answers 202
    And "alice" sends BOOK /{booking}/{room} presenting contract "live"
    Then the response is served under contract "live"
    When "alice" sends BOOK /{booking}/{room} presenting contract "live"
    Then the response is served under contract "live"

    @fixture:agtp-optimistic
    Examples:
      | how                   | obtains                                                                          | transport          |
      | gate, optimistic      | "alice" holds an active contract for BOOK /{booking}/{room} remembered as "live" | TLS 1.3            |
      | gate, optimistic      | "alice" holds an active contract for BOOK /{booking}/{room} remembered as "live" | plaintext loopback |
      | PROPOSE, wrapped form | "alice" proposes BOOK /{booking}/{room} remembered as "live"                     | TLS 1.3            |
      | PROPOSE, legacy form  | "alice" proposes BOOK /{booking}/{room} in the legacy form remembered as "live"  | plaintext loopback |
