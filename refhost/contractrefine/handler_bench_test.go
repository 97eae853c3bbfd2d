package contractrefine

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/parley-conformance/parley/internal/benchpair"
	"github.com/parley-conformance/parley/refhost/hostenv"
)

// BenchmarkPreflightHandler measures POST /v1/preflight (decode, verify,
// decide, one fsync'd WAL append, answer) against a bare handler on the
// same server doing the same I/O: read the body, append a frame of the same
// size to a file and fsync it, answer the same bytes. The ratio is
// refhost/bare time per request; the goal is at most 2 (at least half the
// bare handler's throughput).
func BenchmarkPreflightHandler(b *testing.B) {
	dir := b.TempDir()
	h, err := Open(Config{Mode: "advisory"}, hostenv.Env{DataDir: filepath.Join(dir, "host"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	body := []byte(`{"intent":{"kind":"mission.start","description":"bench","plan_hash":"blake3:ab"},"actor":{"session_id":"s"},"capability":"tool.echo","plan":[{"kind":"tool.echo","params":{"text":"x"},"provenance":{"text":{"source":"operator"}}}],"context":{"zone":"default","environment":"edge","rollback_contract":"rb","expected_evidence":["audit_id"]}}`)

	// The bare handler's frame and answer are the sizes the host writes.
	probe := httptest.NewRecorder()
	h.Handler().ServeHTTP(probe, httptest.NewRequest(http.MethodPost, "/v1/preflight", bytes.NewReader(body)))
	answer := probe.Body.Bytes()
	frame := make([]byte, 3*len(answer))
	for i := range frame {
		frame[i] = 'x'
	}
	frame[len(frame)-1] = '\n'
	f, err := os.OpenFile(filepath.Join(dir, "bare.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var mu sync.Mutex
	mux := http.NewServeMux()
	mux.Handle("/v1/preflight", h.Handler())
	mux.HandleFunc("/bare", func(w http.ResponseWriter, r *http.Request) {
		var v map[string]any
		_ = json.NewDecoder(r.Body).Decode(&v)
		mu.Lock()
		_, _ = f.Write(frame)
		_ = f.Sync()
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := srv.Client()
	post := func(b *testing.B, path string) {
		resp, err := c.Post(srv.URL+path, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s answered %d", path, resp.StatusCode)
		}
	}
	benchpair.Run(b, "refhost/bare", func(b *testing.B) { post(b, "/bare") }, func(b *testing.B) { post(b, "/v1/preflight") })
}
