# agtp-rcns.txt, "Recipe Versioning". The operator edits policy through the
# host's recipe seam. A scenario that edits a recipe leases one of its own
# from the fixture's recipe roster: a copy of room-booking (version 1,
# composing store-room and count-booking, answering 201) under a name and a
# path of its own (/{booking}/{id}); version 2 composes store-room-v2 and
# answers 202. The edit changes nothing another scenario reads, so these
# scenarios share the fixture's host. A version is an opaque string: the
# fixture's recipes room-booking-a to -e serve BOOK /room-a/{id} to
# /room-e/{id} at versions written in other forms, and the scenarios that
# read them need no seam.
@fixture:agtp-confirm-first
Feature: Recipe versioning
  Synthesis captures the recipe version in effect; the contract presents it
  and keeps executing under it after the operator edits the recipe.

  @req:agtp.rcns.recipe.version-captured @profile:agtp-rcns
  Scenario Outline: The captured recipe version is presented in the preview and by INSPECT [<transport>]
    Given an AGTP server reached over <transport>
    And the operator's recipe seam is available
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets mode = "confirm-first"
    And recipe "booking" is its own copy of room-booking, for BOOK /{booking}/{id}
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends BOOK /{booking}/{room} with Allow-RCNS: true
    Then the response status is 461
    And the AGTP field "recipe_lineage.recipe_name" names recipe "booking"
    And the AGTP field "recipe_lineage.recipe_version" is "1"
    When "alice" accepts the preview
    And the operator edits recipe "booking" to version "2", which composes store-room-v2 and answers 202
    And "alice" inspects the contract
    Then the AGTP field "recipe_lineage.recipe_version" is "1"

    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.recipe.executes-captured-version @profile:agtp-rcns
  Scenario Outline: A contract keeps executing its captured version after an edit [<transport>]
    Given an AGTP server reached over <transport>
    And the operator's recipe seam is available
    And its [policies.rcns] sets enabled = true
    And recipe "booking" is its own copy of room-booking, for BOOK /{booking}/{id}
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    And "alice" holds an active contract for BOOK /{booking}/{room} remembered as "old"
    When the operator edits recipe "booking" to version "2", which composes store-room-v2 and answers 202
    And "alice" sends BOOK /{booking}/{room} presenting contract "old"
    Then the response is served under contract "old"
    And the response status is 201
    When "alice" holds an active contract for BOOK /{booking}/{room2} remembered as "new"
    And "alice" sends BOOK /{booking}/{room2} presenting contract "new"
    Then the response is served under contract "new"
    And the response status is 202

    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.propose.recipe.new-version-new-contract @profile:agtp-rcns
  Scenario Outline: A PROPOSE after a recipe edit gets a new contract while the old keeps its version [<transport>]
    Given an AGTP server reached over <transport>
    And the operator's recipe seam is available
    And its [policies.rcns] sets enabled = true
    And recipe "booking" is its own copy of room-booking, for BOOK /{booking}/{id}
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" proposes BOOK /{booking}/{room} remembered as "old"
    Then the AGTP field "recipe_lineage.recipe_version" is "1"
    When the operator edits recipe "booking" to version "2", which composes store-room-v2 and answers 202
    And "alice" proposes BOOK /{booking}/{room}
    Then the response is a 263 for BOOK /{booking}/{room}
    And the response carries a synthesis_id other than contract "old"'s
    And the AGTP field "recipe_lineage.recipe_version" is "2"
    And the contract is remembered as "new"
    When "alice" sends BOOK /{booking}/{room} presenting contract "old"
    Then the response is served under contract "old"
    And the response status is 201
    When "alice" inspects contract "old"
    Then the AGTP field "recipe_lineage.recipe_version" is "1"
    When "alice" sends BOOK /{booking}/{room} presenting contract "new"
    Then the response is served under contract "new"
    And the response status is 202

    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.rcns.recipe.version-opaque @profile:agtp-rcns
  Scenario Outline: A recipe version is presented exactly as the operator wrote it ("<version>", gate) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its [policies.rcns] sets mode = "confirm-first"
    And its recipe "<recipe>" is at version "<version>"
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" sends BOOK <path> with Allow-RCNS: true
    Then the response status is 461
    And the AGTP field "recipe_lineage.recipe_name" is "<recipe>"
    And the AGTP field "recipe_lineage.recipe_version" is the string "<version>"
    When "alice" accepts the preview
    And "alice" inspects the contract
    Then the AGTP field "recipe_lineage.recipe_version" is the string "<version>"

    Examples:
      | recipe         | path           | version              | transport          |
      | room-booking-d | /room-d/{room} | 2026-03-01T09:30:00Z | TLS 1.3            |
      | room-booking-b | /room-b/{room} | v1.10.0              | plaintext loopback |
      | room-booking-c | /room-c/{room} | 007                  | TLS 1.3            |
      | room-booking-a | /room-a/{room} | 1.0                  | plaintext loopback |

  @req:agtp.rcns.recipe.version-opaque @profile:agtp-rcns
  Scenario Outline: A recipe version is presented exactly as the operator wrote it ("<version>", PROPOSE) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And its recipe "<recipe>" is at version "<version>"
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" proposes BOOK <path>
    Then the 263 body carries synthesis_id, endpoint and recipe_lineage "<recipe>" version "<version>"
    When "alice" inspects the contract
    Then the AGTP field "recipe_lineage.recipe_version" is the string "<version>"

    Examples:
      | recipe         | path           | version       | transport          |
      | room-booking-a | /room-a/{room} | 1.0           | TLS 1.3            |
      | room-booking-c | /room-c/{room} | 007           | plaintext loopback |
      | room-booking-e | /room-e/{room} | release 4 (b) | TLS 1.3            |
      | room-booking-b | /room-b/{room} | v1.10.0       | plaintext loopback |
