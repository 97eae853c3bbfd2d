package agl

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/parley-conformance/parley/steps"
)

// contentionRounds is how many rounds of real contention a scenario drives
// on a host without the barrier seam: each round races its contenders at
// a fresh subject (a new approved send, a new draft), so that a host whose
// claim or compare-and-swap has no atomic guard is caught when its
// contenders overlap in any one of them (docs/interpretations.md, "Contention
// without the barrier seam").
const contentionRounds = 24

// contention is how a scenario races contenders at one transaction: held
// at the host's barrier seam (one round, overlap constructed), or, where
// the host has no barrier (404 at the seam), by real contention over
// contentionRounds rounds.
type contention struct {
	kind    string // "claimers", "proposers", "claimer and editor"
	parties int
	barrier bool                // the host's barrier seam holds the contenders
	rounds  [][]*steps.Response // the contenders' answers, per round
	edits   []*steps.Response   // the edit's answer, per round (claimer and editor)
	effects []int               // messages the destination held after each round
	drafts  []string            // each round's draft
}

// armBarrier arms the host's barrier seam: the next parties requests that
// reach one of the points wait there until all have arrived. A host
// without the seam (it answers 404, 405 or 501) is raced for real instead,
// over contentionRounds rounds.
func (s *state) armBarrier(ctx context.Context, kind string, points []string, parties int) error {
	if err := s.ensure(ctx); err != nil {
		return err
	}
	w := steps.From(ctx)
	// Scoped to the scenario's draft: other scenarios race on the same
	// host, each at a barrier of its own resource.
	if s.draftID == "" {
		return steps.Fault("a barrier is armed for the scenario's draft: draft one first")
	}
	b := map[string]any{"points": points, "parties": parties, "timeout_ms": 5000, "resource_id": s.draftID}
	r, ok, err := w.OptionalSeam(ctx, http.MethodPost, seamPath+"/barrier", mustJSON(b), http.Header{"Content-Type": {"application/json"}})
	if err != nil {
		return err
	}
	s.race = &contention{kind: kind, parties: parties, barrier: ok}
	if !ok {
		return nil
	}
	return w.Assert(r.Status == http.StatusCreated, "the host's barrier seam refused %v for %d parties: %s", points, parties, r)
}

// contend runs the scenario's contenders: once when the barrier holds
// them, otherwise contentionRounds times, each round after the first on a
// fresh subject that fresh makes. fire races one round and answers the
// contenders' answers (and the edit's, for a claimer and an editor).
func (s *state) contend(ctx context.Context, kind string, fresh func(context.Context) error, fire func(context.Context) ([]*steps.Response, *steps.Response, error)) error {
	if s.race == nil || s.race.kind != kind {
		return steps.Fault("the %s race without the barrier step that says how they meet", kind)
	}
	w := steps.From(ctx)
	n := 1
	if !s.race.barrier {
		n = contentionRounds
	}
	for i := 0; i < n; i++ {
		if i > 0 {
			if err := fresh(ctx); err != nil {
				return err
			}
		}
		rs, edit, err := fire(ctx)
		if err != nil {
			return err
		}
		s.race.rounds = append(s.race.rounds, rs)
		s.race.edits = append(s.race.edits, edit)
		s.race.drafts = append(s.race.drafts, s.draftID)
		s.race.effects = append(s.race.effects, len(effects(w, s.mail)))
	}
	s.results = s.race.rounds[len(s.race.rounds)-1]
	s.editResult = s.race.edits[len(s.race.edits)-1]
	return nil
}

// raceRounds answers the rounds the scenario raced: the one it holds when
// nothing was raced through contend.
func (s *state) raceRounds() [][]*steps.Response {
	if s.race == nil || len(s.race.rounds) == 0 {
		return [][]*steps.Response{s.results}
	}
	return s.race.rounds
}

// perRoundMessages says, for a scenario raced over several rounds, how
// many messages the destination received in each round; ok is false when
// the scenario raced once (or not at all).
func (s *state) perRoundMessages() ([]int, bool) {
	if s.race == nil || len(s.race.effects) < 2 {
		return nil, false
	}
	out := make([]int, len(s.race.effects))
	prev := 0
	for i, n := range s.race.effects {
		out[i], prev = n-prev, n
	}
	return out, true
}

// noteContention records, on a passing or failing row alike, how the
// contenders met and what the rounds showed: refusals by step say how
// often the contenders really overlapped (a refusal inside the claim
// transaction, step 7, came from a contender that passed every earlier
// check while the subject was still free).
func (s *state) noteContention(w *steps.World, what string) {
	if s.race == nil {
		return
	}
	answers := map[string]int{}
	total := 0
	for _, round := range s.race.rounds {
		for _, r := range round {
			total++
			answers[answerKey(r)]++
		}
	}
	for _, e := range s.race.edits {
		if e != nil {
			answers["edit "+answerKey(e)]++
		}
	}
	keys := make([]string, 0, len(answers))
	for k := range answers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	seen := make([]string, len(keys))
	for i, k := range keys {
		seen[i] = fmt.Sprintf("%d× %s", answers[k], k)
	}
	who := fmt.Sprintf("%d %s", s.race.parties, s.race.kind)
	if s.race.kind == "claimer and editor" {
		who = "a claimer and an editor"
	}
	how := fmt.Sprintf("held at the host's barrier seam: 1 round of %s", who)
	if !s.race.barrier {
		how = fmt.Sprintf("the host has no barrier seam, so by real contention: %d rounds of %s, each on a fresh subject", len(s.race.rounds), who)
	}
	w.Note("%s (%s); answers: %s", what, how, strings.Join(seen, ", "))
}

// answerKey names an answer for the contention note: its status, and for a
// refusal its code and the dispatch step that refused it.
func answerKey(r *steps.Response) string {
	if r == nil {
		return "no answer"
	}
	m, _ := r.JSON()
	if r.Status < 400 {
		if st := str(m, "state"); st != "" {
			return fmt.Sprintf("%d %s", r.Status, st)
		}
		return fmt.Sprint(r.Status)
	}
	k := fmt.Sprintf("%d %s", r.Status, str(m, "error.code"))
	if step, ok := steps.Lookup(m, "error.step"); ok && step != nil {
		k += " at step " + steps.Text(step)
	}
	return k
}
