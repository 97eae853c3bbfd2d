package agtp

import (
	"encoding/json"
	"net/http"
	"time"
)

// SeamPrefix is where Seams mounts its endpoints.
const SeamPrefix = "/conformance/seams/agtp/"

// Seams returns the test-only control surface: what no AGTP message or
// configuration can do while the host runs. The caller mounts it only when
// the operator enables seams.
//
//	GET    recipes              current recipe policy
//	PUT    recipes/{name}       {"version","method","path","composed_of","success_status"}: add or edit a recipe (as after a config edit and restart)
//	DELETE recipes/{name}       remove a recipe from policy
//	POST   clock/advance        {"seconds": n}: move the host clock forward, then expire due contracts;
//	                            {"seconds": n, "expiry_pass": false}: move it and hold the expiry pass
//	                            (background and sweep) until an advance without expiry_pass false
//	POST   sweep                {"mode", "actor"}: the operator console's stale-contract sweep
//	GET    events?agent_id=&type=  lifecycle events (rcns_release ...)
func (h *Host) Seams() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+SeamPrefix+"recipes", func(w http.ResponseWriter, r *http.Request) {
		h.recMu.RLock()
		defer h.recMu.RUnlock()
		out := make([]SectionRecipe, 0, len(h.recipes))
		for _, rc := range h.recipes {
			out = append(out, sectionRecipe(rc))
		}
		writeJSON(w, 200, map[string]any{"recipes": out})
	})
	mux.HandleFunc("PUT "+SeamPrefix+"recipes/{name}", func(w http.ResponseWriter, r *http.Request) {
		var sr SectionRecipe
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&sr); err != nil {
			writeJSON(w, 400, map[string]any{"error": err.Error()})
			return
		}
		rc := Recipe{Name: r.PathValue("name"), Version: sr.Version, Method: sr.Method, Path: sr.Path,
			Steps: sr.ComposedOf, SuccessStatus: sr.SuccessStatus}
		if err := validateRecipe(h.catalog, &rc); err != nil {
			writeJSON(w, 400, map[string]any{"error": err.Error()})
			return
		}
		h.recMu.Lock()
		replaced := false
		for i := range h.recipes {
			if h.recipes[i].Name == rc.Name {
				h.recipes[i], replaced = rc, true
			}
		}
		if !replaced {
			h.recipes = append(append([]Recipe(nil), h.recipes...), rc)
		}
		h.recMu.Unlock()
		h.log.Warn("agtp seam: recipe edited", "name", rc.Name, "version", rc.Version)
		writeJSON(w, 200, sectionRecipe(rc))
	})
	mux.HandleFunc("DELETE "+SeamPrefix+"recipes/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		h.recMu.Lock()
		kept := make([]Recipe, 0, len(h.recipes))
		for _, rc := range h.recipes {
			if rc.Name != name {
				kept = append(kept, rc)
			}
		}
		found := len(kept) != len(h.recipes)
		h.recipes = kept
		h.recMu.Unlock()
		if !found {
			writeJSON(w, 404, map[string]any{"error": "no such recipe"})
			return
		}
		h.log.Warn("agtp seam: recipe removed", "name", name)
		writeJSON(w, 200, map[string]any{"removed": name})
	})
	mux.HandleFunc("POST "+SeamPrefix+"clock/advance", func(w http.ResponseWriter, r *http.Request) {
		var b struct {
			Seconds    float64 `json:"seconds"`
			ExpiryPass *bool   `json:"expiry_pass"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&b); err != nil || b.Seconds <= 0 {
			writeJSON(w, 400, map[string]any{"error": "need {\"seconds\": n} with n > 0"})
			return
		}
		hold := b.ExpiryPass != nil && !*b.ExpiryPass
		h.clockMu.Lock()
		h.offset += time.Duration(b.Seconds * float64(time.Second))
		h.expiryHeld = hold
		h.clockMu.Unlock()
		if hold {
			h.log.Warn("agtp seam: clock moved, expiry pass held", "seconds", b.Seconds)
			writeJSON(w, 200, map[string]any{"now": h.now().Format(time.RFC3339Nano), "expiry_pass": "held"})
			return
		}
		if err := h.expireDue(r.Context()); err != nil {
			writeJSON(w, 500, map[string]any{"error": err.Error()})
			return
		}
		writeJSON(w, 200, map[string]any{"now": h.now().Format(time.RFC3339Nano), "expiry_pass": "ran"})
	})
	mux.HandleFunc("POST "+SeamPrefix+"sweep", func(w http.ResponseWriter, r *http.Request) {
		var b struct{ Mode, Actor string }
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&b); err != nil {
			writeJSON(w, 400, map[string]any{"error": err.Error()})
			return
		}
		if b.Mode == "" {
			b.Mode = h.cfg.Policies.RCNS.OnPolicyChange
		}
		if b.Mode != SweepGrandfather && b.Mode != SweepInvalidate {
			writeJSON(w, 400, map[string]any{"error": "mode must be grandfather or invalidate"})
			return
		}
		if b.Actor == "" {
			writeJSON(w, 400, map[string]any{"error": "actor is required"})
			return
		}
		res, err := h.Sweep(r.Context(), b.Mode, b.Actor)
		if err != nil {
			writeJSON(w, 500, map[string]any{"error": err.Error()})
			return
		}
		writeJSON(w, 200, res)
	})
	mux.HandleFunc("GET "+SeamPrefix+"events", func(w http.ResponseWriter, r *http.Request) {
		evs, err := listEvents(r.Context(), h.db, r.URL.Query().Get("agent_id"), r.URL.Query().Get("type"), 1000)
		if err != nil {
			writeJSON(w, 500, map[string]any{"error": err.Error()})
			return
		}
		writeJSON(w, 200, map[string]any{"events": evs})
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// sectionRecipe is a recipe as the configuration section and the recipe
// seam write it.
func sectionRecipe(rc Recipe) SectionRecipe {
	return SectionRecipe{Name: rc.Name, Version: rc.Version, Method: rc.Method, Path: rc.Path,
		ComposedOf: append([]string{}, rc.Steps...), SuccessStatus: rc.SuccessStatus}
}
