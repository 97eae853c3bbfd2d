package models

import (
	"fmt"
	"strings"
	"sync"

	"pgregory.net/rapid"
)

// Recorder keeps what a model driver records while rapid runs its
// sequences: the operations of the sequence under way, the failing
// sequence and what disagreed in it, how many sequences ran and how many
// answers were checked, and an error (a fault of the suite, a block) that
// aborts the run. The drivers share it, so that every model reports a
// failure the same way (docs/models.md, "Reading a failure").
//
// rapid keeps a shrunk sequence only when it fails as the original did, by
// message and by stack, so a sequence fails with its kind alone, always
// from one place (Recover); the full account is kept aside for the row.
type Recorder struct {
	mu      sync.Mutex
	abort   error
	failed  bool
	checked int
	seqs    int
	// failedAt is the sequence that failed first (0 before any did).
	failedAt int
	trace    []string
	lastSeq  []string
	lastMsg  string
}

// disagreement carries a failure's kind from where it is found to the one
// place a sequence fails from.
type disagreement struct{ kind string }

// Begin starts a sequence: it skips it when the run was aborted, and
// otherwise clears the trace and counts it. A driver calls it first in its
// property, then defers Recover.
func (r *Recorder) Begin(t *rapid.T) {
	r.mu.Lock()
	aborted := r.abort != nil
	if !aborted {
		r.trace = nil
		r.seqs++
	}
	r.mu.Unlock()
	if aborted {
		t.Skip("aborted")
	}
}

// Recover, deferred by the property, fails the sequence with the kind of a
// disagreement Fail raised; any other panic goes on.
func (r *Recorder) Recover(t *rapid.T) {
	if x := recover(); x != nil {
		if k, ok := x.(disagreement); ok {
			t.Fatalf("%s", k.kind)
		}
		panic(x)
	}
}

// Op records one operation of the sequence (and logs it to rapid).
func (r *Recorder) Op(t *rapid.T, format string, a ...any) {
	s := fmt.Sprintf(format, a...)
	r.mu.Lock()
	r.trace = append(r.trace, s)
	r.mu.Unlock()
	t.Log(s)
}

// Fail ends the sequence as failing with kind; the message says what
// disagreed, and the sequence so far is kept as the failing one.
func (r *Recorder) Fail(kind, format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	r.mu.Lock()
	if !r.failed {
		r.failedAt = r.seqs
	}
	r.failed = true
	r.lastSeq = append([]string(nil), r.trace...)
	r.lastMsg = msg
	r.mu.Unlock()
	panic(disagreement{kind})
}

// Abort ends the sequence and the run on err, which is no answer of the
// host's (the first such error is kept).
func (r *Recorder) Abort(t *rapid.T, err error) {
	r.mu.Lock()
	if r.abort == nil {
		r.abort = err
	}
	r.mu.Unlock()
	t.Skip("aborted: ", err)
}

// Aborted is the error that aborted the run, if any.
func (r *Recorder) Aborted() error { r.mu.Lock(); defer r.mu.Unlock(); return r.abort }

// Failed reports whether some sequence failed (shrinking is under way).
func (r *Recorder) Failed() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.failed }

// Checked counts one answer checked against the model.
func (r *Recorder) Checked() { r.mu.Lock(); r.checked++; r.mu.Unlock() }

// Count is how many answers were checked.
func (r *Recorder) Count() int { r.mu.Lock(); defer r.mu.Unlock(); return r.checked }

// Shrunk is how many sequences began after the first failing one: the
// ones rapid made while shrinking. A driver that leases fresh identities for
// every sequence stops shrinking after its share of the roster, so that one
// row's long shrink does not run out the identities of the rows that share
// the roster with it (they would end as suite faults).
func (r *Recorder) Shrunk() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.failed {
		return 0
	}
	return r.seqs - r.failedAt
}

// Seq is the number of the sequence under way (1 for the first).
func (r *Recorder) Seq() int { r.mu.Lock(); defer r.mu.Unlock(); return r.seqs }

// Report renders a failing run for its row: what disagreed (after
// headline), the minimal sequence (its parts fresh in every sequence named
// by fresh), the seed and the command that replays it for requirement id.
func (r *Recorder) Report(headline, fresh, id string, res Result, settings Settings) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n", headline, r.lastMsg)
	fmt.Fprintf(&b, "minimal sequence (%d operations, %s):\n", len(r.lastSeq), fresh)
	for i, op := range r.lastSeq {
		fmt.Fprintf(&b, "  %d. %s\n", i+1, op)
	}
	fmt.Fprintf(&b, "seed %d (run budget %d; %d sequences run, shrinking included)\n", res.Seed, settings.Budget, r.seqs)
	fmt.Fprintf(&b, "replay: parley run --tags '@req:%s' --model-seed %d --model-budget 1 (with this run's target flags)", id, res.Seed)
	return b.String()
}
