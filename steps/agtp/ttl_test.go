package agtp

import (
	"errors"
	"testing"
	"time"

	"github.com/parley-conformance/parley/steps"
)

// A refusal of a contract the real-time TTL witness presented within its TTL
// stays a failure; one presented past it (a slowed run) is blocked, never
// failed.
func TestALateRealTimePresentationBlocks(t *testing.T) {
	s := &state{knobs: map[string]any{"contract_ttl_seconds": float64(2)}, issuedFloor: map[string]time.Time{}}
	refused := steps.Fail("not served")
	s.issuedFloor["early"] = time.Now().Add(time.Hour) // however slowly the test runs
	s.issuedFloor["late"] = time.Now().Add(-2100 * time.Millisecond)
	var f *steps.Failure
	if err := s.liveOrBlocked("early", refused); !errors.As(err, &f) {
		t.Errorf("a refusal within the TTL: %v, want the failure", err)
	}
	var b *steps.Blocked
	if err := s.liveOrBlocked("late", refused); !errors.As(err, &b) {
		t.Errorf("a refusal past the TTL: %v, want blocked", err)
	}
	if err := s.liveOrBlocked("late", nil); err != nil {
		t.Errorf("a contract served past the TTL: %v, want nil", err)
	}
	s.knobs = map[string]any{}
	if err := s.liveOrBlocked("late", refused); !errors.As(err, &f) {
		t.Errorf("a refusal on a fixture that sets no TTL: %v, want the failure", err)
	}
}
