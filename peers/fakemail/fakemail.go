// Package fakemail is a fake email destination that counts the effects it
// receives. It speaks the parley fake-destination protocol:
//
//	POST /send            JSON message; Idempotency-Key and X-AGL-Operation-Id headers
//	GET  /lookup?key=K    {"found":bool,"message_id":...}: authoritative receiver lookup
//	GET  /effects         {"total":n,"effects":[...]}; ?operation_id= or ?key= filters
//	DELETE /effects       forget everything
//	GET  /requests        {"requests":[...]}: every request /send and /lookup received, in order
//	POST /faults          {"mode":"reject"|"fail_after_effect"|"garbage_after_effect"|"hang_after_effect"|
//	                       "hang_before_effect"|"hang_lookup"|"receipt_after_effect","count":n,"receipt"?:JSON}
//
// With Idempotent set it honours the Idempotency-Key: a repeated key is
// answered with the first receipt and no new effect (a fault armed for the
// next message still shapes that answer). Without it every
// accepted POST is a new effect, like most real email and payment APIs.
// A 4xx answer always means the message was rejected before any effect.
package fakemail

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"
)

// Effect is one message the destination accepted.
type Effect struct {
	MessageID   string          `json:"message_id"`
	Key         string          `json:"idempotency_key,omitempty"`
	OperationID string          `json:"operation_id,omitempty"`
	At          time.Time       `json:"at"`
	Body        json.RawMessage `json:"body"`
}

// Fault modes make the destination misbehave for the next Count sends.
const (
	FaultReject          = "reject"               // 422 before any effect
	FaultFailAfterEffect = "fail_after_effect"    // effect, then 500
	FaultGarbage         = "garbage_after_effect" // effect, then 200 with invalid JSON
	FaultHang            = "hang_after_effect"    // effect, then no answer until the client gives up
	FaultHangNoEffect    = "hang_before_effect"   // no effect, and no answer until the client gives up
	FaultHangLookup      = "hang_lookup"          // the next lookups get no answer until the client gives up
	// FaultReceipt takes the effect, then answers 200 with the fault's
	// Receipt: well-formed JSON that the destination chose, for example one
	// that does not match the contract's declared output type.
	FaultReceipt = "receipt_after_effect"
)

// Request is one request /send or /lookup received, whatever came of it:
// the suite's witness of what a host asked the destination, including sends
// that took no effect and lookups.
type Request struct {
	Method      string          `json:"method"`
	Path        string          `json:"path"`
	Key         string          `json:"idempotency_key,omitempty"`
	OperationID string          `json:"operation_id,omitempty"`
	Query       string          `json:"query,omitempty"`
	At          time.Time       `json:"at"`
	Body        json.RawMessage `json:"body,omitempty"`
	// Fault is the fault mode the request met, if any.
	Fault string `json:"fault,omitempty"`
	// Abandoned says the client gave up before the destination answered.
	Abandoned bool `json:"abandoned,omitempty"`
}

type Fault struct {
	Mode  string `json:"mode"`
	Count int    `json:"count"`
	// Receipt is the body a receipt_after_effect fault answers with.
	Receipt json.RawMessage `json:"receipt,omitempty"`
}

// Server is the fake destination. The zero value is not usable; use New.
type Server struct {
	Idempotent bool

	mu       sync.Mutex
	effects  []Effect
	byKey    map[string]string
	faults   []Fault
	lookups  []Fault
	requests []Request
	mux      *http.ServeMux
}

// New returns a destination; idempotent selects whether it deduplicates by
// Idempotency-Key.
func New(idempotent bool) *Server {
	s := &Server{Idempotent: idempotent, byKey: map[string]string{}, mux: http.NewServeMux()}
	s.mux.HandleFunc("POST /send", s.send)
	s.mux.HandleFunc("GET /lookup", s.lookup)
	s.mux.HandleFunc("GET /effects", s.list)
	s.mux.HandleFunc("DELETE /effects", s.reset)
	s.mux.HandleFunc("POST /faults", s.addFault)
	s.mux.HandleFunc("GET /requests", s.listRequests)
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Count is the number of effects so far.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.effects)
}

// CountFor is the number of effects carrying the given operation ID.
func (s *Server) CountFor(operationID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.effects {
		if e.OperationID == operationID {
			n++
		}
	}
	return n
}

// Effects returns a copy of all effects.
func (s *Server) Effects() []Effect {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Effect(nil), s.effects...)
}

// Requests returns a copy of every request /send and /lookup received.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Inject arms a fault for the next f.Count sends (1 when zero), or, for
// hang_lookup, the next f.Count lookups.
func (s *Server) Inject(f Fault) {
	if f.Count <= 0 {
		f.Count = 1
	}
	s.mu.Lock()
	if f.Mode == FaultHangLookup {
		s.lookups = append(s.lookups, f)
	} else {
		s.faults = append(s.faults, f)
	}
	s.mu.Unlock()
}

// Disarm drops every armed fault not yet spent (a model sequence starts
// with none armed, whatever the sequence before it left).
func (s *Server) Disarm() {
	s.mu.Lock()
	s.faults, s.lookups = nil, nil
	s.mu.Unlock()
}

func take(list *[]Fault) string { return takeFault(list).Mode }

// takeFault consumes one use of the first armed fault and returns it.
func takeFault(list *[]Fault) Fault {
	if len(*list) == 0 {
		return Fault{}
	}
	f := &(*list)[0]
	f.Count--
	out := *f
	if f.Count <= 0 {
		*list = (*list)[1:]
	}
	return out
}

// record logs a request (the caller holds mu) and returns its index.
func (s *Server) record(r *http.Request, body []byte, fault string) int {
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Key: r.Header.Get("Idempotency-Key"),
		OperationID: r.Header.Get("X-AGL-Operation-Id"), Query: r.URL.RawQuery, At: time.Now().UTC(), Body: body, Fault: fault})
	return len(s.requests) - 1
}

// hang holds the request until its client gives up, and notes that it did.
func (s *Server) hang(r *http.Request, i int) {
	<-r.Context().Done()
	s.mu.Lock()
	s.requests[i].Abandoned = true
	s.mu.Unlock()
}

func newMessageID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return "msg_" + hex.EncodeToString(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (s *Server) send(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil || !json.Valid(body) {
		writeJSON(w, 400, map[string]any{"error": "body must be JSON"})
		return
	}
	key := r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	fault := takeFault(&s.faults)
	mode := fault.Mode
	req := s.record(r, body, mode)
	switch mode {
	case FaultReject:
		s.mu.Unlock()
		writeJSON(w, 422, map[string]any{"error": "rejected before sending"})
		return
	case FaultHangNoEffect:
		s.mu.Unlock()
		s.hang(r, req)
		return
	}
	// A repeated key at a deduplicating destination takes no new effect;
	// a fault armed for it still applies to its answer.
	id, duplicate := s.byKey[key]
	duplicate = duplicate && s.Idempotent && key != ""
	if !duplicate {
		id = newMessageID()
		s.effects = append(s.effects, Effect{MessageID: id, Key: key, OperationID: r.Header.Get("X-AGL-Operation-Id"), At: time.Now().UTC(), Body: body})
		if key != "" {
			if _, seen := s.byKey[key]; !seen {
				s.byKey[key] = id
			}
		}
	}
	s.mu.Unlock()
	switch mode {
	case FaultFailAfterEffect:
		writeJSON(w, 500, map[string]any{"error": "internal error"})
	case FaultGarbage:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		io.WriteString(w, `{"message_id": `)
	case FaultHang:
		s.hang(r, req)
	case FaultReceipt:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		w.Write(fault.Receipt)
	default:
		writeJSON(w, 200, map[string]any{"message_id": id, "duplicate": duplicate})
	}
}

// lookup is authoritative: a message is found exactly when an effect with
// that key happened.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("key")
	s.mu.Lock()
	mode := take(&s.lookups)
	req := s.record(r, nil, mode)
	id, ok := s.byKey[key]
	s.mu.Unlock()
	if mode == FaultHangLookup {
		s.hang(r, req)
		return
	}
	if !ok {
		writeJSON(w, 200, map[string]any{"found": false})
		return
	}
	writeJSON(w, 200, map[string]any{"found": true, "message_id": id})
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	op, key := r.URL.Query().Get("operation_id"), r.URL.Query().Get("key")
	s.mu.Lock()
	out := []Effect{}
	for _, e := range s.effects {
		if (op == "" || e.OperationID == op) && (key == "" || e.Key == key) {
			out = append(out, e)
		}
	}
	s.mu.Unlock()
	writeJSON(w, 200, map[string]any{"total": len(out), "idempotent": s.Idempotent, "effects": out})
}

func (s *Server) listRequests(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, map[string]any{"requests": s.Requests()})
}

func (s *Server) reset(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.effects, s.byKey, s.faults, s.lookups, s.requests = nil, map[string]string{}, nil, nil, nil
	s.mu.Unlock()
	w.WriteHeader(204)
}

func (s *Server) addFault(w http.ResponseWriter, r *http.Request) {
	var f Fault
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&f); err != nil {
		writeJSON(w, 400, map[string]any{"error": err.Error()})
		return
	}
	switch f.Mode {
	case FaultReject, FaultFailAfterEffect, FaultGarbage, FaultHang, FaultHangNoEffect, FaultHangLookup:
	case FaultReceipt:
		if !json.Valid(f.Receipt) {
			writeJSON(w, 422, map[string]any{"error": "receipt_after_effect needs a JSON receipt"})
			return
		}
	default:
		writeJSON(w, 422, map[string]any{"error": "unknown mode"})
		return
	}
	s.Inject(f)
	writeJSON(w, 201, f)
}
