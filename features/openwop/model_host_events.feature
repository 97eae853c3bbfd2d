# openwop-rfc-0242.md §B.2 (a runless negotiation is a durable host event of
# the caller's tenant), §B.4 (an anonymous exchange is never answered below
# the preferred version, and its record reaches no tenant) and §D (the
# inbound exchanges, then /host/events read for their records), driven as
# seeded random sequences against an executable model (models/hostevents;
# docs/models.md). The readings the model encodes are those of
# docs/interpretations.md ("The durable host-event stream" and after).
@fixture:openwop-model
Feature: Durable host events agree with their model under any sequence of exchanges, subscriptions, resumptions and closes
  Every hand-written scenario is one order of operations someone thought
  of. Here the suite draws sequences: inbound exchanges of two tenants and
  of anonymous callers (A2A agent card or JSON-RPC, MCP initialize, any
  version below, at, between, above the range or none), new and resumed
  subscriptions, reconnections naming the last event received, and closes.
  After every operation each open stream must have delivered, once and in
  order, exactly what the model says its tenant's log holds after the
  stream's starting point; a failing sequence is shrunk to a minimal one.

  Background:
    Given an OpenWOP host that speaks A2A versions "0.3, 1.0" with floor "0.3" and preferred "1.0"
    And that speaks MCP revisions "2025-03-26, 2025-06-18, 2025-11-25" with floor "2025-03-26" and preferred "2025-11-25"

  @req:openwop.model.host-events @profile:openwop-rfc0242
  Scenario: Random sequences of host-event operations agree with the model
    Given the host serves A2A inbound
    And the host serves MCP inbound
    When the suite runs seeded random sequences of host-event operations against the model, two fresh tenants each
    Then every answer and every stream agreed with the model of durable host events
