package agl

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/parley-conformance/parley/models/permits"
	"github.com/parley-conformance/parley/models/revisions"
	"github.com/parley-conformance/parley/steps"
)

// The revision model (agl.model.revision-swaps): several clients at once
// make transitions of one draft revision (the dispatch of its permit, edits
// expecting it, proposals of its handle) while reads go on; the recorded
// history must be linearizable against the sequential model of one resource
// (models/revisions), checked with porcupine.

func registerRevisionModel(c *steps.Catalog) {
	c.When(`^(\d+) clients at once, over (\d+) rounds, read the approved send's draft and swap its revision, their calls recorded$`, func(ctx context.Context, n, rounds int) error {
		return revisionHistory(ctx, n, rounds)
	})
	c.Then(`^the history of the draft's transitions and reads is linearizable against the model of one resource$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		s.mu.Lock()
		h := s.history
		s.mu.Unlock()
		if len(h) == 0 {
			return steps.Fault("no history recorded: the When step must run the clients first")
		}
		ok, verdict, drawing := permits.CheckModel(revisions.Model, h, linearizeTimeout)
		return w.Assert(ok, "the history of %d calls on one draft is %s:\n%s(model: models/revisions; docs/models.md)", len(h), verdict, drawing)
	})
}

// revisionView is what a client read of the draft.
type revisionView struct {
	revision int64
	state    string
	handle   string
}

// revisionHistory runs n clients on the scenario's approved send for up to
// rounds rounds. In a round every client reads the draft; then, held at the
// host's barrier seam (or racing for real on a host without it), each makes
// one transition from the revision it read (see revisionPlan) and reads
// again, while one more client reads the draft three times. The rounds stop
// when the draft was dispatched (nothing is left to swap); the history ends
// with every client reading once more.
func revisionHistory(ctx context.Context, n, rounds int) error {
	s := st(ctx)
	if err := s.ensure(ctx); err != nil {
		return err
	}
	if _, err := s.approvedBody(); err != nil {
		return err
	}
	if s.draftID == "" {
		return steps.Fault("the revision model needs an approved send of a draft")
	}
	start := time.Now()
	var mu sync.Mutex
	var history []porcupine.Operation
	var firstErr error
	call := func(client int, in revisions.Input, do func() (revisions.Output, revisionView, error)) revisionView {
		t0 := time.Since(start).Nanoseconds()
		out, view, err := do()
		t1 := time.Since(start).Nanoseconds()
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return view
		}
		history = append(history, porcupine.Operation{ClientId: client, Input: in, Call: t0, Output: out, Return: t1})
		return view
	}
	read := func(client int) revisionView {
		return call(client, revisions.Input{Kind: revisions.Read}, func() (revisions.Output, revisionView, error) {
			return s.readDraftForModel(ctx)
		})
	}
	views := make([]revisionView, n)
	readAll := func() {
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() { defer wg.Done(); views[i] = read(i) }()
		}
		wg.Wait()
	}
	// A round whose barrier let its parties through on its timeout, before
	// all had arrived (a busy machine), raced nothing: it is made again, a
	// few times at most, so that whether the transitions overlapped does
	// not depend on the machine's load.
	retries := 4
	for round := 0; round < rounds; round++ {
		readAll()
		if firstErr != nil {
			return firstErr
		}
		plan := revisionPlan(views[0].state, n)
		if plan == nil {
			break
		}
		b := map[string]any{"points": []string{"claim", "propose", "edit"}, "parties": n, "timeout_ms": 5000, "resource_id": s.draftID}
		r, barrier, err := steps.From(ctx).OptionalSeam(ctx, http.MethodPost, seamPath+"/barrier", mustJSON(b), http.Header{"Content-Type": {"application/json"}})
		if err != nil {
			return err
		} else if barrier && r.Status != http.StatusCreated {
			return steps.From(ctx).Assert(false, "the host's barrier seam refused %d parties: %s", n, r)
		}
		gate := make(chan struct{})
		var wg sync.WaitGroup
		for i, kind := range plan {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				v := views[i]
				switch kind {
				case revisions.Propose:
					body := s.action(s.sendOp, map[string]any{"draft": v.handle}, s.grant())
					call(i, revisions.Input{Kind: kind, Revision: v.revision}, func() (revisions.Output, revisionView, error) {
						return s.transitionForModel(ctx, http.MethodPost, api+"/proposals", body)
					})
				default:
					body := map[string]any{"owner": s.me.principal, "expected_revision": v.revision,
						"payload": map[string]any{"from": s.me.mailbox, "to": []string{"bob@example.com"}, "subject": "Quarterly numbers", "body": fmt.Sprintf("Edited by client %d.", i)}}
					call(i, revisions.Input{Kind: kind, Revision: v.revision}, func() (revisions.Output, revisionView, error) {
						return s.transitionForModel(ctx, http.MethodPut, api+"/resources/"+s.draftID, body)
					})
				}
				read(i)
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			for range 3 {
				read(n)
			}
		}()
		close(gate)
		wg.Wait()
		if firstErr != nil {
			return firstErr
		}
		if barrier && retries > 0 && !s.barrierMet(ctx) {
			retries--
			round--
		}
	}
	readAll()
	if firstErr != nil {
		return firstErr
	}
	s.mu.Lock()
	s.history = history
	s.mu.Unlock()
	return nil
}

// revisionPlan is the transition each of n clients makes from a draft read
// in state: from Authorized and Proposed they edit; from Draft they propose
// and edit in turn. Any other state leaves nothing to swap: nil. No client
// dispatches the permit: a dispatch that won the first round would end the
// rounds before any two edits of one revision met, so whether a lost edit
// showed would depend on the host's order (the claim's compare-and-swap
// against an edit is witnessed by agl.parallel.revision-cas).
func revisionPlan(state string, n int) []string {
	plan := make([]string, n)
	for i := range plan {
		switch state {
		case "Authorized", "Proposed":
			plan[i] = revisions.Edit
		case "Draft":
			plan[i] = revisions.Edit
			if i%2 == 0 {
				plan[i] = revisions.Propose
			}
		default:
			return nil
		}
	}
	return plan
}

// readDraftForModel reads the draft: its revision, state and handle.
func (s *state) readDraftForModel(ctx context.Context) (revisions.Output, revisionView, error) {
	r, err := s.call(ctx, false, http.MethodGet, api+"/resources/"+s.draftID, roleNone, nil, false)
	if err != nil {
		return revisions.Output{}, revisionView{}, err
	}
	m, _ := r.JSON()
	out := revisions.Output{Status: r.Status, Code: str(m, "error.code"), State: str(m, "state")}
	if n, ok := m["revision"].(json.Number); ok {
		out.Revision, _ = n.Int64()
	}
	return out, revisionView{revision: out.Revision, state: out.State, handle: str(m, "handle")}, nil
}

// transitionForModel makes one transition and reads its answer as the
// model does: the status, a refusal's code, an edit's new revision.
func (s *state) transitionForModel(ctx context.Context, method, path string, body map[string]any) (revisions.Output, revisionView, error) {
	r, err := s.call(ctx, false, method, path, roleNone, body, false)
	if err != nil {
		return revisions.Output{}, revisionView{}, err
	}
	m, _ := r.JSON()
	out := revisions.Output{Status: r.Status, Code: str(m, "error.code")}
	if method == http.MethodPut {
		if n, ok := m["revision"].(json.Number); ok {
			out.Revision, _ = n.Int64()
		}
	}
	if method == http.MethodPost && path == api+"/dispatch" && r.Status == http.StatusOK {
		s.noteOperation(r)
	}
	return out, revisionView{}, nil
}

// barrierMet says the draft's barrier saw all its parties arrive (GET
// barrier?resource_id=: arrived equals parties); false when it timed out
// first, or cannot be read.
func (s *state) barrierMet(ctx context.Context) bool {
	base, err := s.base(ctx, false)
	if err != nil {
		return false
	}
	r, err := steps.From(ctx).Exchange(ctx, base, http.MethodGet, seamPath+"/barrier?resource_id="+url.QueryEscape(s.draftID), nil, nil)
	if err != nil || r.Status != http.StatusOK {
		return false
	}
	m, _ := r.JSON()
	return m != nil && m["parties"] != nil && fmt.Sprint(m["arrived"]) == fmt.Sprint(m["parties"])
}
