package contractrefine

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"testing"
)

func TestSeamWAL(t *testing.T) {
	hs := newHarness(t, Config{})
	d1 := hs.mustPost(goodRequest("a"))
	d2 := hs.mustPost(mutate("b", func(r *PreflightRequest) { r.Context.Zone = "prod" }))
	w := hs.do(http.MethodPost, "/v1/tool", toolBody("tool.echo"), PreflightIDHeader, d1.PreflightID)
	must(t).Equal(http.StatusOK, w.Code)

	t.Run("frames are the file's lines in order", func(t *testing.T) {
		w := hs.do(http.MethodGet, SeamPrefix+"wal", "")
		must(t).Equal(http.StatusOK, w.Code)
		var body struct {
			Frames []json.RawMessage `json:"frames"`
		}
		must(t).NoError(json.Unmarshal(w.Body.Bytes(), &body))
		file, err := os.ReadFile(hs.walPath())
		must(t).NoError(err)
		lines := bytes.Split(bytes.TrimSuffix(file, []byte("\n")), []byte("\n"))
		must(t).Len(body.Frames, len(lines))
		for i := range lines {
			expect(t).JSONEq(string(lines[i]), string(body.Frames[i]))
		}
	})

	cases := []struct {
		query string
		want  []string // kind/outcome per frame
	}{
		{"", []string{"autonomy.preflight/pass", "autonomy.preflight/deny", "autonomy.decision/allow"}},
		{"kind=autonomy.preflight", []string{"autonomy.preflight/pass", "autonomy.preflight/deny"}},
		{"kind=autonomy.decision", []string{"autonomy.decision/allow"}},
		{"attr.audit_id=" + d1.AuditID, []string{"autonomy.preflight/pass", "autonomy.decision/allow"}},
		{"kind=autonomy.preflight&attr.audit_id=" + d1.AuditID, []string{"autonomy.preflight/pass"}},
		{"attr.preflight_id=" + d2.PreflightID, []string{"autonomy.preflight/deny"}},
		{"attr.outcome=pass&attr.outcome=deny", []string{"autonomy.preflight/pass", "autonomy.preflight/deny"}},
		{"attr.repair_hints_count=0&attr.zone=prod", []string{"autonomy.preflight/deny"}},
		{"attr.zone=nowhere", nil},
		{"kind=autonomy.other", nil},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			var got []string
			for _, fr := range hs.frames(tc.query) {
				got = append(got, fr.Kind+"/"+fr.stringAttr("outcome"))
			}
			expect(t).Equal(tc.want, got)
		})
	}

	t.Run("empty result is an empty array", func(t *testing.T) {
		w := hs.do(http.MethodGet, SeamPrefix+"wal?kind=none", "")
		expect(t).JSONEq(`{"frames":[]}`, w.Body.String())
	})
	t.Run("unknown parameter", func(t *testing.T) {
		expect(t).Equal(http.StatusBadRequest, hs.do(http.MethodGet, SeamPrefix+"wal?knd=x", "").Code)
		expect(t).Equal(http.StatusBadRequest, hs.do(http.MethodGet, SeamPrefix+"wal?attr.=x", "").Code)
	})
	t.Run("read-only", func(t *testing.T) {
		w := hs.do(http.MethodPost, SeamPrefix+"wal", "{}")
		expect(t).Equal(http.StatusMethodNotAllowed, w.Code)
		expect(t).Equal(http.MethodGet, w.Header().Get("Allow"))
	})
	t.Run("unknown seam", func(t *testing.T) {
		expect(t).Equal(http.StatusNotFound, hs.do(http.MethodGet, SeamPrefix+"faults", "").Code)
	})
	t.Run("seams are not on the public handler", func(t *testing.T) {
		r, _ := http.NewRequest(http.MethodGet, SeamPrefix+"wal", nil)
		w := &recorder{header: http.Header{}}
		hs.h.Handler().ServeHTTP(w, r)
		expect(t).Equal(http.StatusNotFound, w.code)
	})
}

// TestSeamWALSeesFramesAppendedSinceTheLastRead: the seam keeps what it
// decoded of earlier reads, so a read must still see every frame appended
// after it, and filter the old and the new alike.
func TestSeamWALSeesFramesAppendedSinceTheLastRead(t *testing.T) {
	hs := newHarness(t, Config{})
	d1 := hs.mustPost(goodRequest("a"))
	must(t).Len(hs.frames("kind=autonomy.preflight"), 1)
	d2 := hs.mustPost(goodRequest("b"))
	d3 := hs.mustPost(mutate("c", func(r *PreflightRequest) { r.Context.Zone = "prod" }))
	var ids []string
	for _, fr := range hs.frames("kind=autonomy.preflight") {
		ids = append(ids, fr.stringAttr("preflight_id"))
	}
	expect(t).Equal([]string{d1.PreflightID, d2.PreflightID, d3.PreflightID}, ids)
	expect(t).Len(hs.frames("attr.preflight_id="+d1.PreflightID), 1)
	expect(t).Len(hs.frames("attr.preflight_id="+d3.PreflightID), 1)
	expect(t).Len(hs.frames("attr.zone=prod"), 1)
}

func TestSeamWALWithoutEmitter(t *testing.T) {
	hs := newHarness(t, Config{Emitter: "none"})
	expect(t).Empty(hs.frames(""))
	expect(t).NoFileExists(hs.walPath())
}

// recorder is a minimal ResponseWriter for calls that bypass harness routing.
type recorder struct {
	header http.Header
	code   int
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *recorder) WriteHeader(code int)        { r.code = code }

// TestSeamClockExpiresABinding: moving the clock past a binding's lifetime
// through the seam makes the tool call it binds an expired one, as waiting
// would; a request without a positive number of seconds is refused and
// moves nothing.
func TestSeamClockExpiresABinding(t *testing.T) {
	hs := newHarness(t, Config{Mode: "enforce", EligibilityTTL: "3s"})
	d := hs.mustPost(goodRequest("s"))
	for _, bad := range []string{"", `{}`, `{"seconds": 0}`, `{"seconds": -5}`, `{"seconds": "4"}`} {
		w := hs.do(http.MethodPost, SeamPrefix+"clock/advance", bad)
		must(t).Equal(http.StatusBadRequest, w.Code, "body %q: %s", bad, w.Body.String())
	}
	w := hs.do(http.MethodPost, "/v1/tool", toolBody("tool.echo"), PreflightIDHeader, d.PreflightID)
	must(t).Equal(http.StatusOK, w.Code, "before the clock moves: %s", w.Body.String())

	w = hs.do(http.MethodPost, SeamPrefix+"clock/advance", `{"seconds": 3.5}`)
	must(t).Equal(http.StatusOK, w.Code, w.Body.String())
	w = hs.do(http.MethodPost, "/v1/tool", toolBody("tool.echo"), PreflightIDHeader, d.PreflightID)
	must(t).Equal(http.StatusForbidden, w.Code, "after the clock moved past the binding: %s", w.Body.String())
	expect(t).Equal("contract: binding_expired", decodeTool(t, w.Body.Bytes()).Reason)
}
