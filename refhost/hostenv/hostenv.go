// Package hostenv carries what every refhost family needs from the process
// that hosts it: a private directory for durable state, a logger, and a clock.
package hostenv

import (
	"log/slog"
	"time"
)

// Env is handed to each family's Open. DataDir is private to that family and
// survives a restart of the host when the operator points it at the same path.
type Env struct {
	DataDir string
	Logger  *slog.Logger
	// Now is the host's clock; nil means time.Now.
	Now func() time.Time
}

// Clock returns the configured clock or time.Now.
func (e Env) Clock() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// Log returns the configured logger or a discarding one.
func (e Env) Log() *slog.Logger {
	if e.Logger != nil {
		return e.Logger
	}
	return slog.New(slog.DiscardHandler)
}
