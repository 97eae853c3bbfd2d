package agl

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/parley-conformance/parley/models"
	"github.com/parley-conformance/parley/models/permits"
	"github.com/parley-conformance/parley/steps"
)

// The permit model (agl.model.permit-claims): several clients at once
// dispatch one approved send and read its permit; the recorded history of
// calls and answers must be linearizable against the sequential model of one
// permit (models/permits), checked with porcupine.

// linearizeTimeout bounds porcupine's search; a history of a few dozen calls
// on one permit is decided in microseconds.
const linearizeTimeout = 10 * time.Second

func registerModel(c *steps.Catalog) {
	c.When(`^(\d+) clients at once dispatch the approved send and read its permit, their calls recorded$`, func(ctx context.Context, n int) error {
		return permitHistory(ctx, n)
	})
	c.Then(`^the history of dispatches and permit reads is linearizable against the model of one permit$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		s.mu.Lock()
		h := s.history
		s.mu.Unlock()
		if len(h) == 0 {
			return steps.Fault("no history recorded: the When step must run the clients first")
		}
		ok, verdict, drawing := permits.Check(h, linearizeTimeout)
		return w.Assert(ok, "the history of %d calls on one permit is %s:\n%s(model: models/permits; docs/models.md)", len(h), verdict, drawing)
	})
}

// permitHistory runs n clients at once on the scenario's approved send:
// client i reads the permit, dispatches the send (half of them; the others
// read instead), and reads again, in an order shuffled from the run's model
// seed; then, once every client is done, each reads the permit once more.
func permitHistory(ctx context.Context, n int) error {
	s := st(ctx)
	if err := s.ensure(ctx); err != nil {
		return err
	}
	body, err := s.approvedBody()
	if err != nil {
		return err
	}
	settings, err := models.Current()
	if err != nil {
		return steps.Fault("%v", err)
	}
	seed := settings.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	scripts := make([][]string, n)
	for i := range scripts {
		mid := permits.Read
		if i%2 == 0 {
			mid = permits.Dispatch
		}
		scripts[i] = []string{permits.Read, mid, permits.Read}
		rng.Shuffle(len(scripts[i]), func(a, b int) { scripts[i][a], scripts[i][b] = scripts[i][b], scripts[i][a] })
	}
	start := time.Now()
	var mu sync.Mutex
	var history []porcupine.Operation
	var firstErr error
	call := func(client int, kind string) {
		t0 := time.Since(start).Nanoseconds()
		out, err := s.permitCall(ctx, kind, body)
		t1 := time.Since(start).Nanoseconds()
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return
		}
		history = append(history, porcupine.Operation{ClientId: client, Input: permits.Input{Kind: kind}, Call: t0, Output: out, Return: t1})
	}
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i, script := range scripts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			for _, kind := range script {
				call(i, kind)
			}
		}()
	}
	close(gate)
	wg.Wait()
	for i := range scripts {
		wg.Add(1)
		go func() { defer wg.Done(); call(i, permits.Read) }()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	s.mu.Lock()
	s.history = history
	s.mu.Unlock()
	return nil
}

// permitCall makes one call of the history and reads its answer as the
// model does.
func (s *state) permitCall(ctx context.Context, kind string, body map[string]any) (permits.Output, error) {
	w := steps.From(ctx)
	if kind == permits.Dispatch {
		r, err := s.call(ctx, false, http.MethodPost, api+"/dispatch", roleNone, body, false)
		if err != nil {
			return permits.Output{}, err
		}
		m, _ := r.JSON()
		out := permits.Output{Status: r.Status, Code: str(m, "error.code")}
		switch {
		case r.Status == http.StatusOK:
			out.Completed, out.Operation = true, str(m, "operation_id")
			s.noteOperation(r)
		case r.Status == http.StatusConflict && out.Code == "permit_consumed":
			out.Consumed = true
		}
		return out, nil
	}
	r, err := s.call(ctx, false, http.MethodGet, api+"/permits/"+s.permitID, roleNone, nil, false)
	if err != nil {
		return permits.Output{}, err
	}
	m, jerr := r.JSON()
	if err := w.Assert(r.Status == http.StatusOK && jerr == nil && str(m, "permit_id") == s.permitID, "reading the permit: %s", r); err != nil {
		return permits.Output{}, err
	}
	return permits.Output{Status: r.Status, ReadConsumed: m["consumed_at"] != nil, Operation: str(m, "consumed_by_operation")}, nil
}
