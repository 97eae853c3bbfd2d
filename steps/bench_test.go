package steps

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/parley-conformance/parley/internal/benchpair"
)

// BenchmarkExchange measures the suite's cost per HTTP exchange (World.Do:
// deadline, body limit, the request kept, the observation recorded) against
// a bare client round trip to the same server, in the same run. The ratio is
// reported as suite/bare.
func BenchmarkExchange(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"outcome":"pass","preflight_id":"3f1c2a9e-8b7d-4c6e-9a5f-0d1e2f3a4b5c"}`))
	}))
	defer srv.Close()
	body := []byte(`{"intent":{"kind":"mission.start","plan_hash":"blake3:ab"},"capability":"tool.echo"}`)
	c := &http.Client{}
	w, ctx := hostAt(b, srv.URL)
	benchpair.Run(b, "suite/bare", func(b *testing.B) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/preflight", bytes.NewReader(body))
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}, func(b *testing.B) {
		if _, err := w.Do(ctx, http.MethodPost, "/v1/preflight", body, nil); err != nil {
			b.Fatal(err)
		}
	})
}
