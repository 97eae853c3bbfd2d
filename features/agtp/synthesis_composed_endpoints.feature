# agtp-rcns.txt, "Synthesis-Composed Endpoints". The fixture recipe
# room-booking composes rooms.put and bookings.count, both needing
# rooms:write; the proposal itself declares only rooms:read.
@fixture:agtp-confirm-first
Feature: Synthesis-composed endpoints
  Authority is preserved through composition: a synthesis whose composed
  step needs a scope the agent lacks fails at evaluation, before anything
  runs.

  @req:agtp.propose.composition.authority-preserved @profile:agtp-rcns
  Scenario Outline: A composed step needing rooms:write fails the proposal at evaluation (<case>) [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "<grant>"
    When "alice" proposes BOOK /room/{room} declaring authority "rooms:read" <claim>
    Then the response status is <answer> naming scope rooms:write
    And the response names no synthesis_id
    And "alice" holds no contract for the proposed pair
    When "alice" sends BOOK /room/{room} without Allow-RCNS
    Then the response is the standard unregistered-pair refusal
    And the room record {room} does not exist

    Examples:
      | case                  | grant                      | claim                                 | answer                         | transport          |
      | granted but unclaimed | rooms:*, rcns:negotiate    | claiming "rcns:negotiate, rooms:read" | 262 with reason scope-required | TLS 1.3            |
      | granted but unclaimed | rooms:*, rcns:negotiate    | claiming "rcns:negotiate, rooms:read" | 262 with reason scope-required | plaintext loopback |
      | not granted           | rooms:read, rcns:negotiate | in the wrapped form                   | 455 with reason scope-exceeded | TLS 1.3            |
      | not granted           | rooms:read, rcns:negotiate | in the wrapped form                   | 455 with reason scope-exceeded | plaintext loopback |
