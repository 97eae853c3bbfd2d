package agl

import (
	"encoding/json"
	"net/http"
)

// The legacy entry point. AGL keeps its pre-contract tool registry for
// legacy workflows (spec section 10): a legacy tool takes JSON arguments and
// nothing else, no grant, no permit, no operation identity. A protected
// handler must never be reachable that way (section 7), so the entry point
// serves only tools that are neither a trusted implementation nor the name of
// a registered contract.

// legacyTool is an unprotected handler of the old registry.
type legacyTool struct {
	Description string   `json:"description"`
	Effects     []string `json:"effects"`
	run         func(args json.RawMessage) (any, error)
}

var legacyTools = map[string]*legacyTool{
	"legacy.echo": {
		Description: "returns its arguments unchanged; no effect outside the host",
		Effects:     []string{},
		run: func(args json.RawMessage) (any, error) {
			return ParseJSON(args)
		},
	},
}

type legacyRequest struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

func (h *Host) hLegacyInvoke(w http.ResponseWriter, r *http.Request) {
	var req legacyRequest
	if d := decode(r, &req); d != nil {
		writeDenial(w, d)
		return
	}
	if req.Tool == "" {
		writeDenial(w, deny(422, "schema_error", "schema_error", 0, "tool is required"))
		return
	}
	// A trusted implementation, or any name a protected contract is
	// registered under, is protected: only the dispatcher may run it.
	protected := implementations[req.Tool] != nil
	if !protected {
		_, err := h.loadContract(r.Context(), h.st.db, req.Tool)
		switch {
		case err == nil:
			protected = true
		case !isNoRows(err):
			h.fail(w, err)
			return
		}
	}
	if protected {
		writeDenial(w, deny(403, "protected_handler", "authorization_denied", 0,
			"%s is a protected handler: it runs only through POST %sdispatch, with a grant and, where its contract asks, a permit", req.Tool, PathPrefix))
		return
	}
	tool := legacyTools[req.Tool]
	if tool == nil {
		writeDenial(w, deny(404, "unknown_tool", "request", 0, "no legacy tool %q", req.Tool))
		return
	}
	args := req.Arguments
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	out, err := tool.run(args)
	if err != nil {
		writeDenial(w, deny(422, "schema_error", "schema_error", 0, "arguments: %v", err))
		return
	}
	writeJSON(w, 200, map[string]any{"tool": req.Tool, "result": out})
}

func legacyToolList() []map[string]any {
	out := []map[string]any{}
	for _, name := range []string{"legacy.echo"} {
		t := legacyTools[name]
		out = append(out, map[string]any{"name": name, "description": t.Description, "effects": t.Effects})
	}
	return out
}
