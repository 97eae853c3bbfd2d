package contractrefine

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/parley-conformance/parley/refhost/hostenv"
	"github.com/parley-conformance/parley/schemas"
)

// FuzzPreflightRequest: a preflight body is an untrusted caller's. The host
// never panics, answers only the statuses the spec lists for the endpoint,
// and whatever it answers 200 is a decision of the published shape.
func FuzzPreflightRequest(f *testing.F) {
	for _, s := range []string{
		`{"intent":{"kind":"mission.start","plan_hash":"blake3:ab"},"actor":{"session_id":"s"},"capability":"tool.echo","plan":[{"kind":"tool.echo","params":{"text":"x"},"provenance":{"text":{"source":"operator"}}}],"context":{"zone":"default","rollback_contract":"rb","expected_evidence":["audit_id"]}}`,
		`{"intent":{},"plan":[{"kind":"tool.write"}]}`,
		`{"plan":null}`, `{"plan":[1,2,3]}`, `{"context":{"zone":7}}`, `[]`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	h, err := Open(Config{Mode: "enforce"}, hostenv.Env{DataDir: f.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { h.Close() })
	allowed := map[int]bool{200: true, 400: true, 413: true, 500: true, 503: true}
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/preflight", bytes.NewReader(body))
		h.Handler().ServeHTTP(rec, req)
		if !allowed[rec.Code] {
			t.Fatalf("status %d for %q", rec.Code, body)
		}
		if rec.Code == http.StatusOK {
			if err := schemas.ValidateJSON("contractrefine/preflight-decision.json", rec.Body.Bytes()); err != nil {
				t.Fatalf("a 200 that is not a decision: %v\n%s", err, rec.Body.Bytes())
			}
		}
	})
}
