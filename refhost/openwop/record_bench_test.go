package openwop

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-conformance/parley/internal/benchpair"
	"github.com/parley-conformance/parley/refhost/hostenv"
)

// BenchmarkRecordAndDeliver measures an inbound A2A exchange that the host
// records as a durable host event (a SQLite insert at synchronous=FULL) and
// delivers to a subscribed tenant over /host/events, against a bare handler
// on the same server doing the same I/O: one insert of an envelope of the
// same size into a table of the same shape, with the same pragmas, and one
// event-stream frame to a waiting subscriber. The ratio is host/bare time;
// the goal is at most 2 (at least half the bare throughput).
func BenchmarkRecordAndDeliver(b *testing.B) {
	dir := b.TempDir()
	const key = "bench-key"
	h, err := Open(Config{Tenants: []Tenant{{ID: "acme", APIKeys: []string{key}}}},
		hostenv.Env{DataDir: filepath.Join(dir, "host"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()

	// The bare side: the same table shape and pragmas, and a stream that
	// sends a frame after each insert.
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "synchronous(FULL)", "busy_timeout(5000)"} {
		q.Add("_pragma", p)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "bare.db")+"?"+q.Encode())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(schemaSQL); err != nil {
		b.Fatal(err)
	}
	inserted := make(chan string, 1)
	mux := http.NewServeMux()
	mux.Handle("/", h.Handler())
	envelope := strings.Repeat("x", 420)
	mux.HandleFunc("POST /bare/record", func(w http.ResponseWriter, r *http.Request) {
		ws := r.Header.Get("OpenWOP-Workspace-Id")
		if _, err := db.ExecContext(r.Context(), `INSERT INTO host_events (event_id, tenant_id, workspace_id, type, envelope) VALUES (?, ?, ?, ?, ?)`,
			ws, "acme", ws, "negotiation.decided", envelope); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		inserted <- ws
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"protocolVersion":"1.0"}`))
	})
	mux.HandleFunc("GET /bare/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		for {
			select {
			case ws := <-inserted:
				fmt.Fprintf(w, "event: negotiation.decided\ndata: {\"workspaceId\":%q,\"x\":%q}\n\n", ws, envelope)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// The streams close before the server does, or its Close would wait on
	// them.
	var streams []io.Closer
	subscribe := func(path string) *bufio.Reader {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := srv.Client().Do(req)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("subscribe %s: %v", path, err)
		}
		streams = append(streams, resp.Body)
		return bufio.NewReader(resp.Body)
	}
	defer func() {
		for _, s := range streams {
			s.Close()
		}
	}()
	hostStream, bareStream := subscribe("/host/events"), subscribe("/bare/events")
	await := func(b *testing.B, s *bufio.Reader, ws string) {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			line, err := s.ReadString('\n')
			if err != nil {
				b.Fatal(err)
			}
			if strings.Contains(line, ws) {
				return
			}
		}
		b.Fatalf("no frame of %s", ws)
	}
	n := 0
	exchange := func(b *testing.B, method, path string) string {
		n++
		ws := fmt.Sprintf("bench-%d", n)
		req, _ := http.NewRequestWithContext(context.Background(), method, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("OpenWOP-Workspace-Id", ws)
		req.Header.Set("A2A-Version", "1.0")
		resp, err := srv.Client().Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("%s %s answered %d", method, path, resp.StatusCode)
		}
		return ws
	}
	benchpair.Run(b, "host/bare", func(b *testing.B) {
		await(b, bareStream, exchange(b, http.MethodPost, "/bare/record"))
	}, func(b *testing.B) {
		await(b, hostStream, exchange(b, http.MethodGet, agentCardPath))
	})
}
