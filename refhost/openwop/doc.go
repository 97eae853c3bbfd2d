// Package openwop is parley's reference OpenWOP v2 host for RFC 0242: every
// A2A and MCP version negotiation, in either direction, leaves a
// negotiation.decided record that names the version the requesting side
// asked for. A negotiation inside a run lands on that run's log; one made
// before any run exists (an inbound agent-card fetch or MCP initialize) is a
// durable host event of the caller's tenant, streamed from /host/events.
//
// The host is meant to be run by an operator: events live in SQLite under
// hostenv.Env.DataDir, the stream resumes from Last-Event-ID across restarts,
// API keys map to tenants, and every exchange has a body limit and deadline.
// Test-only control endpoints live behind Seams, which the caller mounts only
// when the operator asks for them. docs/openwop-host.md describes the surface.
package openwop
