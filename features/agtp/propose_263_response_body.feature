# agtp-rcns.txt, "263 Response Body" (and "Recipe Versioning" for the
# captured version it presents). Fixture recipe room-booking is at version 1.
@fixture:agtp-confirm-first
Feature: The 263 Proposal Approved body
  An approved proposal answers 263 naming the synthesized endpoint by its
  top-level method and path (the proposed pair), with its synthesis_id, the
  endpoint definition and the recipe lineage it was synthesized under.

  @req:agtp.propose.approved.pair-matches @profile:agtp-rcns
  Scenario Outline: The 263's top-level method and path are the proposed pair (<form> form) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" proposes BOOK /room/{room} in the <form> form
    Then the response is a 263 for BOOK /room/{room}

    Examples:
      | form    | transport          |
      | wrapped | TLS 1.3            |
      | wrapped | plaintext loopback |
      | legacy  | TLS 1.3            |
      | legacy  | plaintext loopback |

  @req:agtp.propose.approved.body @profile:agtp-rcns
  Scenario Outline: The 263 carries synthesis_id, endpoint and the captured recipe lineage [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" proposes BOOK /room/{room}
    Then the 263 body carries synthesis_id, endpoint and recipe_lineage "room-booking" version "1"
    And the AGTP body satisfies the schema "agtp/proposal-approved.json"

    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |
