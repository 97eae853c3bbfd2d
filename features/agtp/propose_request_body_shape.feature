# agtp-rcns.txt, "PROPOSE Request Body Shape". A proposal is sent as PROPOSE
# to target / with the endpoint definition in the request envelope's
# parameters: under endpoint (wrapped form) or beside a name (legacy form).
@fixture:agtp-confirm-first
Feature: PROPOSE request body shape
  A server accepts both body forms and refuses a body that carries both.

  @req:agtp.propose.body.wrapped-form @profile:agtp-rcns
  Scenario Outline: A proposal in the wrapped form is evaluated and approved [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" proposes BOOK /room/{room} in the wrapped form
    Then the response is a 263 for BOOK /room/{room}
    When "alice" sends BOOK /room/{room} presenting the contract
    Then the response is served under the contract

    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.propose.body.legacy-form @profile:agtp-rcns
  Scenario Outline: A proposal in the legacy form is evaluated and approved [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" proposes BOOK /room/{room} in the legacy form
    Then the response is a 263 for BOOK /room/{room}
    When "alice" sends BOOK /room/{room} presenting the contract
    Then the response is served under the contract

    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |

  @req:agtp.propose.body.ambiguous-400 @profile:agtp-rcns
  Scenario Outline: A proposal carrying both endpoint and name is ambiguous [<transport>]
    Given an AGTP server reached over <transport>
    And its [policies.rcns] sets enabled = true
    And agent "alice" has trust tier 1 and is granted "rooms:*, rcns:negotiate"
    When "alice" proposes BOOK /room/{room} in both forms at once
    Then the response status is 400 with reason ambiguous-body
    And the response names no synthesis_id
    And "alice" holds no contract for the proposed pair

    Examples:
      | transport          |
      | TLS 1.3            |
      | plaintext loopback |
