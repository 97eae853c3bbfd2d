package agl

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Fault boundaries, named as the spec's acceptance section names them.
const (
	boundaryClaim        = "claim"
	boundaryExternalCall = "external_call"
	boundaryCompletion   = "completion"
)

var errInjected = errors.New("agl: injected fault")

// fault is one armed injection. Action "fail" makes the boundary fail (the
// claim transaction aborts; the external call loses its connection after
// sending; the outcome transaction aborts), "exit" ends the host process at
// the boundary, "halt" stops this host instance there as a crash would but
// leaves the OS process running, "delay" sleeps there first, "hold" waits
// there until the suite releases it (POST faults/release), the request's
// client gives up or the instance stops: a pause that lasts exactly as long
// as the suite observes it, however slowly the machine runs.
type fault struct {
	Boundary  string `json:"boundary"`
	Action    string `json:"action"`
	Operation string `json:"operation,omitempty"`
	Count     int    `json:"count,omitempty"`
	DelayMS   int    `json:"delay_ms,omitempty"`
	ExitCode  int    `json:"exit_code,omitempty"`
	Fired     int    `json:"fired"`
	Released  bool   `json:"released,omitempty"`

	// release is closed when the suite releases a "hold"; copies taken at
	// the boundary share it.
	release chan struct{}
}

type faults struct {
	mu   sync.Mutex
	list []*fault
}

func newFaults() *faults { return &faults{} }

// take consumes one firing of the first fault armed at boundary for op:
// a hold when hold is set, any other action when it is not.
func (f *faults) take(boundary, op string, hold bool) *fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ft := range f.list {
		if (ft.Action == "hold") != hold {
			continue
		}
		if ft.Boundary == boundary && (ft.Operation == "" || ft.Operation == op) && (ft.Count == 0 || ft.Fired < ft.Count) {
			ft.Fired++
			c := *ft
			return &c
		}
	}
	return nil
}

// fire is called by production code at each boundary; with no fault armed
// (always, unless an operator mounted the seams) it does nothing.
func (h *Host) fire(ctx context.Context, boundary, op string) error {
	ft := h.faults.take(boundary, op, false)
	if ft == nil {
		return nil
	}
	h.log.Warn("agl: injected fault", "boundary", boundary, "action", ft.Action, "operation", op)
	switch ft.Action {
	case "delay":
		select {
		case <-time.After(time.Duration(ft.DelayMS) * time.Millisecond):
		case <-ctx.Done():
		case <-h.stop:
		}
		return nil
	case "halt":
		// The instance dies in place, as its process would: no further
		// heartbeat, no answer on this or any later request, nothing more
		// written for this operation (a transaction open at the boundary
		// rolls back). The OS process survives, so a host embedded in a
		// test process (the suite's in-process target) can be crashed too.
		h.halt()
		panic(http.ErrAbortHandler)
	case "exit":
		code := ft.ExitCode
		if code == 0 {
			code = 86
		}
		h.exit(code)
		return errInjected // reached only when exit is replaced in tests
	default:
		return errInjected
	}
}

// free releases a hold (the caller holds faults.mu).
func (ft *fault) free() {
	if !ft.Released && ft.release != nil {
		ft.Released = true
		close(ft.release)
	}
}

// hold is called by production code where a dispatch may be held (inside
// the claim transaction; after the claim, before the handler's deadline
// starts): it returns at once unless a "hold" is armed there for op, and
// otherwise when the suite releases it, ctx ends (the dispatch was
// cancelled) or the instance stops. Time held is not the handler's: the
// external call's hold comes before its deadline is set.
func (h *Host) hold(ctx context.Context, boundary, op string) {
	ft := h.faults.take(boundary, op, true)
	if ft == nil {
		return
	}
	h.log.Warn("agl: dispatch held by the seam", "boundary", boundary, "operation", op)
	select {
	case <-ft.release:
	case <-ctx.Done():
	case <-h.stop:
	}
}

// Seams serves the test-only control endpoints under SeamPrefix. The caller
// mounts it only when the operator enables seams.
func (h *Host) Seams() http.Handler {
	// Mounting the seams is what lets the barrier in the store hold this
	// host's requests; a host without seams never waits at it.
	h.seamsMounted.Store(true)
	mux := http.NewServeMux()
	p := strings.TrimSuffix(SeamPrefix, "/")
	mux.HandleFunc("POST "+p+"/faults", func(w http.ResponseWriter, r *http.Request) {
		var ft fault
		if d := decode(r, &ft); d != nil {
			writeDenial(w, d)
			return
		}
		switch ft.Boundary {
		case boundaryClaim, boundaryExternalCall, boundaryCompletion:
		default:
			writeDenial(w, deny(422, "schema_error", "schema_error", 0, "boundary must be claim, external_call or completion"))
			return
		}
		switch ft.Action {
		case "fail", "exit", "halt", "delay", "hold":
		default:
			writeDenial(w, deny(422, "schema_error", "schema_error", 0, "action must be fail, exit, halt, delay or hold"))
			return
		}
		if ft.Count == 0 {
			ft.Count = 1
		}
		ft.Fired, ft.Released, ft.release = 0, false, make(chan struct{})
		h.faults.mu.Lock()
		h.faults.list = append(h.faults.list, &ft)
		h.faults.mu.Unlock()
		writeJSON(w, 201, ft)
	})
	mux.HandleFunc("GET "+p+"/faults", func(w http.ResponseWriter, r *http.Request) {
		h.faults.mu.Lock()
		defer h.faults.mu.Unlock()
		writeJSON(w, 200, map[string]any{"faults": h.faults.list})
	})
	mux.HandleFunc("DELETE "+p+"/faults", func(w http.ResponseWriter, r *http.Request) {
		h.faults.mu.Lock()
		for _, ft := range h.faults.list {
			ft.free()
		}
		h.faults.list = nil
		h.faults.mu.Unlock()
		w.WriteHeader(204)
	})
	// Release the holds armed for an operation (at one boundary, or at
	// every one): a dispatch held there goes on, and one that reaches the
	// boundary later passes it.
	mux.HandleFunc("POST "+p+"/faults/release", func(w http.ResponseWriter, r *http.Request) {
		var sel struct {
			Boundary  string `json:"boundary"`
			Operation string `json:"operation"`
		}
		if d := decode(r, &sel); d != nil {
			writeDenial(w, d)
			return
		}
		if sel.Operation == "" {
			writeDenial(w, deny(422, "schema_error", "schema_error", 0, "operation is required"))
			return
		}
		n := 0
		h.faults.mu.Lock()
		for _, ft := range h.faults.list {
			if ft.Action == "hold" && ft.Operation == sel.Operation && (sel.Boundary == "" || ft.Boundary == sel.Boundary) && !ft.Released {
				ft.free()
				n++
			}
		}
		h.faults.mu.Unlock()
		writeJSON(w, 200, map[string]any{"released": n})
	})
	// Run the crash-recovery sweep now instead of on the next tick, and
	// answer once every resumption in flight (this sweep's, or one an
	// earlier tick started) has decided: resumed the send, or stopped.
	mux.HandleFunc("POST "+p+"/recover", func(w http.ResponseWriter, r *http.Request) {
		n, err := h.recoverOrphans(r.Context())
		if err != nil {
			h.fail(w, err)
			return
		}
		// The count covers a tick's sweep that committed before this one
		// and has not started its resumptions yet.
		for h.resuming.Load() > 0 {
			select {
			case <-r.Context().Done():
				return
			case <-h.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
		writeJSON(w, 200, map[string]any{"recovered": n})
	})
	mux.HandleFunc("GET "+p+"/admission", h.hAdmissionSeam)
	mux.HandleFunc("POST "+p+"/retention", h.hRetentionSeam)
	mux.HandleFunc("GET "+p+"/clock", h.hClockSeam)
	mux.HandleFunc("POST "+p+"/clock", h.hClockSeam)
	mux.HandleFunc("POST "+p+"/barrier", h.hArmBarrier)
	mux.HandleFunc("GET "+p+"/barrier", h.hBarrierState)
	mux.HandleFunc("DELETE "+p+"/barrier", h.hDisarmBarrier)
	mux.HandleFunc("GET "+p+"/instance", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"instance": h.instance, "pid": pid(), "database_path": h.cfg.DatabasePath})
	})
	return h.wrap(mux)
}

// halt stops the instance as a crash would: the heartbeat stops (so another
// host on the same store recovers its claims once the lease lapses) and
// every later request is dropped without an answer.
func (h *Host) halt() {
	h.halted.Store(true)
	h.stopOnce.Do(func() { close(h.stop) })
	h.log.Warn("agl: host instance halted by the seam; it no longer heartbeats or answers", "instance", h.instance)
}
