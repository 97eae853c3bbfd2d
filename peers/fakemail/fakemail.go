// Package fakemail is a fake email destination that counts the effects it
// receives. It speaks the parley fake-destination protocol:
//
//	POST /send            JSON message; Idempotency-Key and X-AGL-Operation-Id headers
//	GET  /lookup?key=K    {"found":bool,"message_id":...}: authoritative receiver lookup
//	GET  /effects         {"total":n,"effects":[...]}; ?operation_id= or ?key= filters
//	DELETE /effects       forget everything
//	POST /faults          {"mode":"reject"|"fail_after_effect"|"garbage_after_effect"|"hang_after_effect","count":n}
//
// With Idempotent set it honours the Idempotency-Key: a repeated key is
// answered with the first receipt and no new effect. Without it every
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
)

type Fault struct {
	Mode  string `json:"mode"`
	Count int    `json:"count"`
}

// Server is the fake destination. The zero value is not usable; use New.
type Server struct {
	Idempotent bool

	mu      sync.Mutex
	effects []Effect
	byKey   map[string]string
	faults  []Fault
	mux     *http.ServeMux
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

// Inject arms a fault for the next f.Count sends (1 when zero).
func (s *Server) Inject(f Fault) {
	if f.Count <= 0 {
		f.Count = 1
	}
	s.mu.Lock()
	s.faults = append(s.faults, f)
	s.mu.Unlock()
}

func (s *Server) takeFault() string {
	if len(s.faults) == 0 {
		return ""
	}
	f := &s.faults[0]
	f.Count--
	mode := f.Mode
	if f.Count <= 0 {
		s.faults = s.faults[1:]
	}
	return mode
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
	mode := s.takeFault()
	if mode == FaultReject {
		s.mu.Unlock()
		writeJSON(w, 422, map[string]any{"error": "rejected before sending"})
		return
	}
	if s.Idempotent && key != "" {
		if id, ok := s.byKey[key]; ok {
			s.mu.Unlock()
			writeJSON(w, 200, map[string]any{"message_id": id, "duplicate": true})
			return
		}
	}
	id := newMessageID()
	s.effects = append(s.effects, Effect{MessageID: id, Key: key, OperationID: r.Header.Get("X-AGL-Operation-Id"), At: time.Now().UTC(), Body: body})
	if key != "" {
		if _, seen := s.byKey[key]; !seen {
			s.byKey[key] = id
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
		<-r.Context().Done()
	default:
		writeJSON(w, 200, map[string]any{"message_id": id, "duplicate": false})
	}
}

// lookup is authoritative: a message is found exactly when an effect with
// that key happened.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("key")
	s.mu.Lock()
	id, ok := s.byKey[key]
	s.mu.Unlock()
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

func (s *Server) reset(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.effects, s.byKey, s.faults = nil, map[string]string{}, nil
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
	case FaultReject, FaultFailAfterEffect, FaultGarbage, FaultHang:
	default:
		writeJSON(w, 422, map[string]any{"error": "unknown mode"})
		return
	}
	s.Inject(f)
	writeJSON(w, 201, f)
}
