// Package loadtest holds the loopback load test of the reference host: the
// bundled host started in-process with its ContractRefine, AGL and AGTP
// families, and many concurrent agents driving the AGTP gate, POST
// /v1/preflight and AGL dispatch at once, count- and time-bounded. It
// checks that every answer is the expected one, that no operation, effect or
// WAL frame is lost or duplicated, that memory stays flat after a warm-up
// round and that nothing is left running. The package has no code of its
// own; `go test ./refhost/loadtest` runs it (`-short` runs a smaller one).
package loadtest
