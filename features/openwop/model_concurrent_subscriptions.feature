# openwop-rfc-0242.md §B.2 (a runless negotiation is a durable host event of
# the caller's tenant), §B.4 (an anonymous exchange's record reaches no
# tenant) and §D (the /host/events reads, new and resumed with
# Last-Event-ID), with clients and subscribers at once: the recorded history
# is checked for linearizability against models/subscriptions with porcupine
# (docs/models.md). The readings are those of docs/interpretations.md
# ("Concurrent subscriptions").
@fixture:openwop-model
Feature: Concurrent exchanges and subscriptions agree with one log per tenant
  Hand-written scenarios and the host-event model make one call at a time.
  Here clients of two tenants and an anonymous one make inbound exchanges
  while subscribers of both tenants subscribe, new or resumed after a
  record; every call is recorded with its call and answer instants, a
  subscription's answer being what it delivered up to a barrier record
  made after every other. Some order of the calls, each taking effect
  within its interval, must explain every stream's deliveries: each record
  once, in one log order per tenant that every subscriber of it shares, only
  the tenant's own, a resumed stream exactly what follows the record it
  named.

  Background:
    Given an OpenWOP host that speaks A2A versions "0.3, 1.0" with floor "0.3" and preferred "1.0"
    And that speaks MCP revisions "2025-03-26, 2025-06-18, 2025-11-25" with floor "2025-03-26" and preferred "2025-11-25"

  @req:openwop.model.concurrent-subscriptions @profile:openwop-rfc0242
  Scenario: Exchanges and subscriptions at once are linearizable against one log per tenant
    Given the host serves A2A inbound
    And the host serves MCP inbound
    When 6 clients of two fresh tenants and an anonymous one make inbound exchanges while 6 subscribers subscribe, new or resumed, their calls recorded
    Then the history of exchanges and subscriptions is linearizable against the model of the tenants' host-event logs
