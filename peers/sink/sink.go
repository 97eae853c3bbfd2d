// Package sink is a destination the suite runs for tools whose effect lies
// outside the host: it takes every delivery posted to it and keeps it, so a
// step can witness that an effect happened, or did not, where the host
// cannot answer for it. Deliveries are found by a marker the suite chose
// (a value unique to one scenario inside the delivered params).
package sink

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
)

// maxDelivery bounds one delivery the sink keeps.
const maxDelivery = 1 << 20

// maxKept bounds how many deliveries the sink keeps; the oldest go first.
const maxKept = 100000

// Delivery is one request the sink received.
type Delivery struct {
	Header http.Header
	Body   []byte
}

// Sink is a running destination.
type Sink struct {
	srv  *httptest.Server
	mu   sync.Mutex
	kept []Delivery
}

// Start runs a sink on a loopback port.
func Start() *Sink {
	s := &Sink{}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

func (s *Sink) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST a delivery", http.StatusMethodNotAllowed)
		return
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxDelivery+1))
	if err != nil || len(b) > maxDelivery {
		http.Error(w, "delivery unreadable or too large", http.StatusRequestEntityTooLarge)
		return
	}
	s.mu.Lock()
	s.kept = append(s.kept, Delivery{Header: r.Header.Clone(), Body: b})
	if len(s.kept) > maxKept {
		s.kept = append([]Delivery(nil), s.kept[len(s.kept)-maxKept:]...)
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// URL is where hosts deliver.
func (s *Sink) URL() string { return s.srv.URL }

// Carrying returns the deliveries whose body contains marker.
func (s *Sink) Carrying(marker string) []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Delivery
	for _, d := range s.kept {
		if bytes.Contains(d.Body, []byte(marker)) {
			out = append(out, d)
		}
	}
	return out
}

// Close stops the sink.
func (s *Sink) Close() { s.srv.Close() }

var (
	sharedOnce sync.Once
	shared     *Sink
)

// Shared is one sink for the whole process: every scenario of a run
// configures the same destination URL, so that they share hosts, and tells
// its deliveries apart by its own marker.
func Shared() *Sink {
	sharedOnce.Do(func() { shared = Start() })
	return shared
}
