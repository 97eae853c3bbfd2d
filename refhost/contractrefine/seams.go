package contractrefine

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"
)

// SeamPrefix is where Seams serves its endpoints.
const SeamPrefix = "/conformance/seams/contractrefine/"

func (h *Host) seamRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(SeamPrefix+"wal", h.guard(http.MethodGet, h.seamWAL))
	mux.HandleFunc(SeamPrefix+"clock/advance", h.guard(http.MethodPost, h.seamClock))
	mux.HandleFunc("/", notFound)
	return mux
}

// seamWAL answers GET .../wal?kind=K&attr.NAME=VALUE with the matching frames
// read back from the WAL file in file order. Every given filter must match;
// repeating one name (or kind) accepts any of its values. Unknown query
// parameters are refused so a misspelt filter cannot silently match all.
func (h *Host) seamWAL(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var kinds []string
	attrs := map[string][]string{}
	for k, vs := range q {
		switch name, isAttr := strings.CutPrefix(k, "attr."); {
		case k == "kind":
			kinds = vs
		case isAttr && name != "":
			attrs[name] = vs
		default:
			writeError(w, http.StatusBadRequest, "unknown query parameter "+k+"; use kind or attr.<name>")
			return
		}
	}
	frames := []json.RawMessage{}
	if h.wal != nil {
		var err error
		frames, err = h.wal.matching(func(kind string, got map[string]string) bool {
			if len(kinds) > 0 && !slices.Contains(kinds, kind) {
				return false
			}
			for name, want := range attrs {
				if v, ok := got[name]; !ok || !slices.Contains(want, v) {
					return false
				}
			}
			return true
		})
		if err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
	}
	writeValue(w, http.StatusOK, struct {
		Frames []json.RawMessage `json:"frames"`
	}{frames})
}

// attrText is the value a filter compares against: a string attribute's
// contents, or any other attribute's JSON text (so attr.repair_hints_count=0
// works).
func attrText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// seamClock answers POST .../clock/advance {"seconds": n} by moving the
// host's clock n seconds ahead (n > 0), so that a binding's lifetime can
// pass without the client waiting it out; it answers the new time.
func (h *Host) seamClock(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Seconds float64 `json:"seconds"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&b); err != nil || b.Seconds <= 0 || b.Seconds > 365*24*3600 {
		writeError(w, http.StatusBadRequest, `need {"seconds": n} with 0 < n <= one year`)
		return
	}
	h.offset.Add(int64(b.Seconds * float64(time.Second)))
	writeValue(w, http.StatusOK, struct {
		Now string `json:"now"`
	}{h.now().UTC().Format(time.RFC3339Nano)})
}
