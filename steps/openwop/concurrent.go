package openwop

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/parley-conformance/parley/models"
	"github.com/parley-conformance/parley/models/hostevents"
	"github.com/parley-conformance/parley/models/subscriptions"
	"github.com/parley-conformance/parley/peers/sse"
	"github.com/parley-conformance/parley/steps"
)

// The concurrent-subscriptions requirement
// (openwop.model.concurrent-subscriptions): clients of two fresh tenants
// and an anonymous one make inbound exchanges at once while subscribers of
// both tenants subscribe, new or resumed after a record with
// Last-Event-ID; every call is recorded with its call and answer instants
// (a subscription's answer is its cut: the suite reads it until it
// delivered a barrier record made after every other), and the history must
// be linearizable against models/subscriptions, checked with porcupine.

// ConcurrentID is the requirement the concurrent history witnesses.
const ConcurrentID = "openwop.model.concurrent-subscriptions"

const (
	// concurExchanges is how many exchanges each recording client makes.
	concurExchanges = 4
	// concurMaxExchanges bounds them while subscribers are still opening.
	concurMaxExchanges = 12
	// concurSetup is how many records each tenant has before the clients
	// start (the records a resumed subscription names).
	concurSetup = 2
	// concurLinearize bounds porcupine's search; a history of a few dozen
	// calls is decided in milliseconds.
	concurLinearize = 10 * time.Second
	// concurMaxFrames bounds what one stream is read for before its cut.
	concurMaxFrames = 500
)

// concurRun is what the concurrent clients recorded.
type concurRun struct {
	history []porcupine.Operation
	// ids is every eventId each record was delivered under, by workspace.
	ids  map[string]map[string]bool
	seed uint64
}

func registerConcurrent(c *steps.Catalog) {
	c.When(`^(\d+) clients of two fresh tenants and an anonymous one make inbound exchanges while (\d+) subscribers subscribe, new or resumed, their calls recorded$`, func(ctx context.Context, clients, subs int) error {
		return concurrentHistory(ctx, clients, subs)
	})
	c.Then(`^the history of exchanges and subscriptions is linearizable against the model of the tenants' host-event logs$`, func(ctx context.Context) error {
		w, s := steps.From(ctx), st(ctx)
		s.mu.Lock()
		r := s.concur
		s.mu.Unlock()
		if r == nil || len(r.history) == 0 {
			return steps.Fault("no history recorded: the When step must run the clients first")
		}
		ok, verdict, drawing := subscriptions.Check(r.history, concurLinearize)
		if err := w.Assert(ok, "the history of %d calls on two tenants' host events is %s (seed %d):\n%s(model: models/subscriptions; records named by tenant, a b, and call order, x anonymous; docs/models.md)", len(r.history), verdict, r.seed, drawing); err != nil {
			return err
		}
		names := subscriptions.NamesOf(r.history)
		var twice []string
		for ws, ids := range r.ids {
			if len(ids) > 1 {
				twice = append(twice, fmt.Sprintf("%s under %s", names[ws], strings.Join(sortedKeys(ids), ", ")))
			}
		}
		sort.Strings(twice)
		return w.Assert(len(twice) == 0, "a record was delivered under more than one eventId: %s\n%s", strings.Join(twice, "; "), drawing)
	})
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// concurrentHistory records the history: each tenant first gets
// concurSetup records, made one after another and read by a subscription
// (which learns their eventIds); then, at once, nClients clients (tenant 0
// and 1 in turn) and an anonymous one make concurExchanges exchanges each,
// and nSubs subscribers (tenant 0 and 1 in turn; new ones and ones resumed
// after a setup record) subscribe once every client has an answer to its
// first exchange, while the clients make the rest (and more, until every
// subscriber has its stream). When all are done, each
// tenant makes a barrier exchange, and every subscription is read until it
// delivered its tenant's barrier record: that is its cut.
func concurrentHistory(ctx context.Context, nClients, nSubs int) error {
	w, s := steps.From(ctx), st(ctx)
	if f, ok := w.Fixture(); !ok || f.Name != "openwop-model" {
		return steps.Fault("the concurrent history leases fresh tenants of the openwop-model fixture; tag the feature @fixture:openwop-model")
	}
	if nClients < 2 || nSubs < 2 {
		return steps.Fault("the concurrent history needs at least two clients and two subscribers")
	}
	settings, err := models.CurrentIn(ctx)
	if err != nil {
		return steps.Fault("%v", err)
	}
	seed := settings.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	rng := rand.New(rand.NewPCG(seed, 0x2545f4914f6cdd1d))
	var tenants [subscriptions.Tenants]string
	for i := range tenants {
		if tenants[i], err = modelTenant(ctx, fmt.Sprintf("concurrent-%d", i)); err != nil {
			return err
		}
	}
	start := time.Now()
	now := func() int64 { return time.Since(start).Nanoseconds() }
	run := &concurRun{ids: map[string]map[string]bool{}, seed: seed}
	var mu sync.Mutex
	add := func(op porcupine.Operation) {
		mu.Lock()
		run.history = append(run.history, op)
		mu.Unlock()
	}
	protocols := []string{hostevents.A2A, hostevents.MCP}
	// exchange makes one exchange as tenant (-1: anonymous) and records it.
	exchange := func(client, tenant int, protocol, named string) (string, error) {
		c := caller{}
		if tenant >= 0 {
			var err error
			if c, err = s.caller(tenants[tenant]); err != nil {
				return "", err
			}
		}
		ws := workspaceFor("concurrent")
		what := "initializes MCP naming " + named
		if protocol == hostevents.A2A {
			what = "fetches the agent card naming " + named
		}
		t0 := now()
		x, err := inbound(ctx, c, protoName(protocol), formCard, named, nil, ws)
		t1 := now()
		if err != nil {
			return "", err
		}
		answer := "refused"
		if !x.refused {
			answer = "accepted at " + x.version
		}
		add(porcupine.Operation{ClientId: client, Call: t0, Return: t1,
			Input:  subscriptions.Input{Kind: subscriptions.Record, Tenant: tenant, Workspace: ws, What: what},
			Output: subscriptions.Output{Answer: answer}})
		return ws, nil
	}
	draw := func() (string, string) {
		p := protocols[rng.IntN(len(protocols))]
		return p, modelVersions[p][1+rng.IntN(len(modelVersions[p])-1)]
	}
	// The setup records, and a subscription per tenant that reads them.
	setup := make([][]string, subscriptions.Tenants)
	for t := range tenants {
		for range concurSetup {
			ws, err := exchange(100+t, t, hostevents.A2A, d2a(s))
			if err != nil {
				return err
			}
			setup[t] = append(setup[t], ws)
		}
	}
	ids := map[string]string{} // setup workspace -> its eventId
	for t := range tenants {
		t0 := now()
		ts, err := dialStream(ctx, tenants[t], "")
		if err != nil {
			return err
		}
		got, err := readUntil(w, ts, setup[t][len(setup[t])-1], run, &mu, ids)
		ts.s.Close()
		if err != nil {
			return err
		}
		add(porcupine.Operation{ClientId: 110 + t, Call: t0, Return: now(),
			Input: subscriptions.Input{Kind: subscriptions.Subscribe, Tenant: t}, Output: subscriptions.Output{Delivered: got}})
	}
	// The subscribers' plans, drawn before anything runs.
	type plan struct {
		tenant int
		after  string // the setup record it resumes after; "" for new
	}
	plans := make([]plan, nSubs)
	for i := range plans {
		plans[i].tenant = i % subscriptions.Tenants
		if (i/subscriptions.Tenants)%2 == 1 {
			plans[i].after = setup[plans[i].tenant][rng.IntN(concurSetup)]
		}
	}
	scripts := make([][][2]string, nClients+1)
	for i := range scripts {
		for range concurExchanges {
			p, v := draw()
			scripts[i] = append(scripts[i], [2]string{p, v})
		}
	}
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	type open struct {
		plan
		ts   *tenantStream
		call int64
	}
	streams := make([]*open, nSubs)
	gate := make(chan struct{})
	var firstDone sync.WaitGroup // every client answered its first exchange
	firstDone.Add(nClients + 1)
	var opened sync.WaitGroup // every subscriber has its stream (or failed)
	opened.Add(nSubs)
	allOpen := make(chan struct{})
	go func() { opened.Wait(); close(allOpen) }()
	var wg sync.WaitGroup
	for i, script := range scripts {
		tenant := i % subscriptions.Tenants
		if i == nClients {
			tenant = -1
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			// The client keeps making exchanges until every subscriber has
			// its stream (at least its script, at most concurMaxExchanges),
			// so that subscriptions open while exchanges are answered.
			for k := 0; k < concurMaxExchanges; k++ {
				if k == 1 {
					firstDone.Done()
				}
				if k >= len(script) {
					select {
					case <-allOpen:
						return
					default:
					}
				}
				x := script[k%len(script)]
				if _, err := exchange(i, tenant, x[0], x[1]); err != nil {
					fail(err)
					if k == 0 {
						firstDone.Done()
					}
					return
				}
			}
		}()
	}
	for i, p := range plans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer opened.Done()
			<-gate
			firstDone.Wait()
			after := ""
			if p.after != "" {
				after = ids[p.after]
			}
			t0 := now()
			ts, err := dialStream(ctx, tenants[p.tenant], after)
			if err != nil {
				fail(err)
				return
			}
			streams[i] = &open{plan: p, ts: ts, call: t0}
		}()
	}
	close(gate)
	wg.Wait()
	defer func() {
		for _, o := range streams {
			if o != nil {
				o.ts.s.Close()
			}
		}
	}()
	if firstErr != nil {
		return firstErr
	}
	// The barriers, then every subscription read to its cut.
	var barrier [subscriptions.Tenants]string
	for t := range tenants {
		if barrier[t], err = exchange(200+t, t, hostevents.A2A, d2a(s)); err != nil {
			return err
		}
	}
	for i, o := range streams {
		got, err := readUntil(w, o.ts, barrier[o.tenant], run, &mu, nil)
		if err != nil {
			return err
		}
		add(porcupine.Operation{ClientId: nClients + 1 + i, Call: o.call, Return: now(),
			Input: subscriptions.Input{Kind: subscriptions.Subscribe, Tenant: o.tenant, After: o.after}, Output: subscriptions.Output{Delivered: got}})
	}
	s.mu.Lock()
	s.concur = run
	s.mu.Unlock()
	return nil
}

// d2a is the host's preferred A2A version (a barrier and a setup record
// are exchanges every host accepts).
func d2a(s *state) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.a2a.preferred
}

// readUntil reads a stream's negotiation.decided records until it
// delivered the one of workspace until, and returns the workspaces
// delivered, in order. It notes every record's eventId in run, and into
// learn (when not nil) by workspace. A stream that ends, or does not
// deliver the record within recordWait, is cut there: what it delivered is
// its answer (the model then judges it).
func readUntil(w *steps.World, ts *tenantStream, until string, run *concurRun, mu *sync.Mutex, learn map[string]string) ([]string, error) {
	var got []string
	deadline := time.Now().Add(recordWait)
	for n := 0; n < concurMaxFrames; n++ {
		left := time.Until(deadline)
		if left <= 0 {
			return got, nil
		}
		f, err := ts.s.Next(left)
		if errors.Is(err, sse.ErrTimeout) {
			return got, nil
		}
		if err != nil {
			return got, nil
		}
		r := parseFrame(f)
		obs := *ts.sub
		obs.Body = []byte(r.text())
		w.Observe(&obs)
		if !isDecided(r) || r.env == nil {
			continue
		}
		ws, _ := r.env["workspaceId"].(string)
		id := fmt.Sprint(r.env["eventId"])
		mu.Lock()
		if run.ids[ws] == nil {
			run.ids[ws] = map[string]bool{}
		}
		run.ids[ws][id] = true
		mu.Unlock()
		if learn != nil {
			learn[ws] = id
		}
		got = append(got, ws)
		if ws == until {
			return got, nil
		}
	}
	return got, nil
}
