package agl

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/parley-conformance/parley/refhost/agl/checker"
)

// POST /agl/v1/workflows/check: the protocol and ownership checker
// (docs/agl-binding.md §11). The body is an agl-workflow/1 document; the
// answer is a checked-workflow certificate or the diagnostics. Anyone may
// ask: a certificate states what the checker proved about that exact
// document and is never an authorization (dispatch still needs its grant
// and permit, and nothing here reads or writes the operation store).

// CertificateVersion names the certificate's shape.
const CertificateVersion = "agl-certificate/1"

type certificate struct {
	Version        string             `json:"certificate_version"`
	Workflow       string             `json:"workflow"`
	IRVersion      string             `json:"ir_version"`
	IRDigest       string             `json:"ir_digest"`
	CanonVersion   string             `json:"canon_version"`
	CheckerVersion string             `json:"checker_version"`
	EffectBound    []string           `json:"effect_bound"`
	ResourcesAfter []checker.Resource `json:"resources_after"`
}

func (h *Host) hCheckWorkflow(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeDenial(w, deny(413, "body_too_large", "request", 0, "request body exceeds %d bytes", mbe.Limit))
			return
		}
		writeDenial(w, deny(400, "malformed_request", "schema_error", 0, "request body: %v", err))
		return
	}
	if !json.Valid(raw) {
		writeDenial(w, deny(400, "malformed_request", "schema_error", 0, "the body is not JSON"))
		return
	}
	// The certificate names the document by the digest of its canonical
	// encoding, so a document with no single meaning (duplicate keys,
	// invalid UTF-8, a number beyond the encoding) is refused outright.
	doc, err := ParseJSON(raw)
	if err != nil {
		writeDenial(w, deny(422, "invalid_workflow", "schema_error", 0, "the workflow has no canonical encoding: %v", err))
		return
	}
	if _, ok := doc.(map[string]any); !ok {
		writeDenial(w, deny(422, "invalid_workflow", "schema_error", 0, "a workflow is a JSON object"))
		return
	}
	wf, err := checker.Decode(raw)
	if err != nil {
		var ie *checker.InvalidError
		d := deny(422, "invalid_workflow", "schema_error", 0, "not an %s workflow: %v", checker.IRVersion, err)
		if errors.As(err, &ie) {
			if ie.Unsupported {
				d = deny(422, "unsupported_ir_version", "schema_error", 0, "%v", ie)
			}
			d.Detail = map[string]any{"path": ie.Path, "supported": []string{checker.IRVersion}}
		}
		writeDenial(w, d)
		return
	}
	res := checker.Check(wf)
	if !res.OK() {
		writeJSON(w, 200, map[string]any{"checked": false, "ir_version": checker.IRVersion, "diagnostics": res.Diagnostics})
		return
	}
	digest, _, err := Digest(doc)
	if err != nil {
		writeDenial(w, deny(422, "invalid_workflow", "schema_error", 0, "the workflow has no canonical encoding: %v", err))
		return
	}
	writeJSON(w, 200, map[string]any{"checked": true, "ir_version": checker.IRVersion, "diagnostics": []checker.Diagnostic{},
		"certificate": certificate{Version: CertificateVersion, Workflow: wf.Name, IRVersion: checker.IRVersion, IRDigest: digest,
			CanonVersion: CanonVersion, CheckerVersion: checker.Version, EffectBound: res.EffectBound, ResourcesAfter: res.ResourcesAfter}})
}
