package contractrefine

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
)

// SeamPrefix is where Seams serves its endpoints.
const SeamPrefix = "/conformance/seams/contractrefine/"

func (h *Host) seamRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(SeamPrefix+"wal", h.guard(http.MethodGet, h.seamWAL))
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
		err := h.wal.scan(func(line []byte, fr *rawFrame) error {
			if len(kinds) > 0 && !slices.Contains(kinds, fr.Kind) {
				return nil
			}
			for name, want := range attrs {
				raw, ok := fr.Attrs[name]
				if !ok || !slices.Contains(want, attrText(raw)) {
					return nil
				}
			}
			frames = append(frames, json.RawMessage(line)) // ReadBytes returned a fresh slice
			return nil
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
