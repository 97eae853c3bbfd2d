package agtp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/google/uuid"

	"github.com/parley-conformance/parley/models/idempotency"
	"github.com/parley-conformance/parley/models/permits"
	"github.com/parley-conformance/parley/steps"
	wire "github.com/parley-conformance/parley/wire/agtp"
)

// The idempotency model (agtp.model.idempotent-retries): several
// connections at once send keyed gate requests, most of them the same
// (Agent-ID, Idempotency-Key); the recorded history must be linearizable
// against the sequential model of the idempotency cache
// (models/idempotency), checked with porcupine.

// idemLinearizeTimeout bounds porcupine's search; a history of a few
// keyed requests is decided in microseconds.
const idemLinearizeTimeout = 10 * time.Second

// idemSlot is one (agent, key) pair of the history and how many
// connections send its request at once.
type idemSlot struct {
	agent, key, place string
	copies            int
}

// idemPlan: agent a's key k1 four times and its key k2 twice, each for a
// room of its own, and agent b's key k1 (the same key, the same room)
// twice: eight requests, at most six gate evaluations per agent.
func idemPlan(a, b string) []idemSlot {
	return []idemSlot{{a, "k1", "room", 4}, {a, "k2", "room2", 2}, {b, "k1", "room", 2}}
}

func registerIdempotencyModel(c *steps.Catalog) {
	c.When(`^connections at once send keyed gate requests of "([a-z]+)" and "([a-z]+)", most of them with one Idempotency-Key, their calls recorded$`, func(ctx context.Context, a, b string) error {
		return idempotencyHistory(ctx, idemPlan(a, b))
	})
	c.Then(`^the history of keyed requests is linearizable against the model of the idempotency cache$`, func(ctx context.Context) error {
		s, w := st(ctx), steps.From(ctx)
		if len(s.idemHistory) == 0 {
			return steps.Fault("no history recorded: the When step must run the connections first")
		}
		ok, verdict, drawing := permits.CheckModel(idempotency.Model, s.idemHistory, idemLinearizeTimeout)
		return w.Assert(ok, "the history of %d keyed requests is %s:\n%s(model: models/idempotency; docs/models.md)", len(s.idemHistory), verdict, drawing)
	})
}

// idempotencyHistory sends every request of plan at once, each on a
// connection of its own (dialled beforehand), and records the history.
func idempotencyHistory(ctx context.Context, plan []idemSlot) error {
	s, w := st(ctx), steps.From(ctx)
	if len(plan) > idempotency.Slots {
		return steps.Fault("the idempotency model holds at most %d slots", idempotency.Slots)
	}
	type job struct {
		client int
		slot   int
		conn   *wire.Client
		req    *wire.Request
		name   string
	}
	total := 0
	for _, sl := range plan {
		total += sl.copies
	}
	// Every connection is dialled before any request is sent (dial also
	// reads the body form the host declares).
	conns := make([]*wire.Client, total)
	for i := range conns {
		c, err := s.dial(ctx)
		if err != nil {
			return err
		}
		conns[i] = c
	}
	var jobs []job
	for i, sl := range plan {
		a, err := s.agent(ctx, sl.agent)
		if err != nil {
			return err
		}
		target := s.expand("/room/{" + sl.place + "}")
		taskID := "task-" + sl.key + "-" + s.salt // a replay is the same request: same envelope, same task
		params := defaultParams(target, s.salt)
		body := requestBody(s.form, "BOOK", taskID, params)
		for range sl.copies {
			if h := SendHook; h != nil {
				h(Sent{Kind: "request", Method: "BOOK", Target: target, AgentID: a.id, Params: params, OnPurpose: s.purposes()})
			}
			req, err := wire.NewRequest("BOOK", target, body)
			if err != nil {
				return steps.Fault("cannot build the AGTP request BOOK %s: %v", target, err)
			}
			req.Header.Set("Agent-ID", a.id)
			req.Header.Set("Content-Type", wire.MediaType)
			req.Header.Set("Task-ID", taskID)
			req.Header.Set("Request-ID", "req-"+uuid.NewString())
			req.Header.Set("Allow-RCNS", "true")
			req.Header.Set("Idempotency-Key", sl.key+"-"+s.salt)
			jobs = append(jobs, job{client: len(jobs), slot: i, conn: conns[len(jobs)], req: req, name: fmt.Sprintf("%s %s", sl.agent, sl.key)})
		}
	}
	start := time.Now()
	var mu sync.Mutex
	var history []porcupine.Operation
	var firstErr error
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			xctx, cancel := steps.ExchangeContext(ctx)
			defer cancel()
			t0 := time.Since(start).Nanoseconds()
			resp, err := j.conn.Do(xctx, j.req)
			t1 := time.Since(start).Nanoseconds()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = steps.Fail("BOOK %s as %q (key %s): no valid AGTP answer: %v", j.req.Target, j.name, j.req.Header.Get("Idempotency-Key"), err)
				}
				return
			}
			steps.NoteAnswer()
			r := &steps.Response{Method: "BOOK", URL: j.req.Target, ReqHeader: http.Header(j.req.Header).Clone(), ReqBody: j.req.Body,
				Status: resp.Status, Header: http.Header(resp.Header), Body: resp.Body}
			w.Observe(r)
			history = append(history, porcupine.Operation{ClientId: j.client, Input: idempotency.Input{Slot: j.slot, Name: j.name},
				Call: t0, Output: idemOutput(r), Return: t1})
		}()
	}
	close(gate)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	s.idemHistory = history
	return nil
}

// idemOutput reads an answer as the model does: its status, the contract
// it previews or is served under, and the whole response as a replay must
// repeat it (status, Contract-Synthesized, the document with its members
// in one order).
func idemOutput(r *steps.Response) idempotency.Output {
	out := idempotency.Output{Status: r.Status}
	if sids := issuedBy(r); len(sids) > 0 {
		out.Contract = sids[0]
	}
	doc := string(r.Body)
	var v any
	if json.Unmarshal(r.Body, &v) == nil {
		if b, err := json.Marshal(v); err == nil {
			doc = string(b)
		}
	}
	out.Answer = fmt.Sprintf("%d %s %s", r.Status, r.Header.Get("Contract-Synthesized"), doc)
	return out
}
