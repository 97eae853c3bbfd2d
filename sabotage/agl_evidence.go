package sabotage

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
)

// Rules for the AGL evidence obligations (spec 11, 13 Stage 3;
// docs/agl-binding.md §13): each breaks one requirement of profile
// agl-evidence by rewriting what the host answers, or by turning one of
// its refusals into an acceptance.

func aglEvPath(x *Exchange, method, suffix string) bool {
	return x.Method == method && strings.HasPrefix(x.Path, aglAPI+"/evidence/") && strings.HasSuffix(x.Path, suffix)
}

func aglEvReceipt(x *Exchange) bool {
	return aglEvPath(x, http.MethodPost, "/receipts") || (x.Method == http.MethodGet && strings.HasPrefix(x.Path, aglAPI+"/evidence/receipts/"))
}
func aglEvReport(x *Exchange) bool  { return aglIs(x, http.MethodPost, "/evidence/reports") }
func aglEvAttest(x *Exchange) bool  { return aglEvPath(x, http.MethodPost, "/attestations") }
func aglEvPublish(x *Exchange) bool { return aglEvPath(x, http.MethodPost, "/publication") }
func aglEvPublication(x *Exchange) bool {
	return aglEvPublish(x) || (x.Method == http.MethodGet && strings.HasPrefix(x.Path, aglAPI+"/evidence/publications/"))
}

// aglEvSeen is what the evidence rules learn from the traffic: the first
// digest recorded for each source, and the credentials presented to
// sources, by host.
var aglEvSeen struct {
	sync.Mutex
	first       map[string]string
	credentials map[string][]string
}

func aglEvSource(x *Exchange) (url, credential string) {
	var b struct {
		Source struct {
			URL        string `json:"url"`
			Credential string `json:"credential"`
		} `json:"source"`
	}
	json.Unmarshal(x.Body, &b)
	return b.Source.URL, b.Source.Credential
}

// aglEvJudgment rewrites the judgment of attestation and publication answers.
func aglEvJudgment(edit func(x *Exchange, j map[string]any)) func(x *Exchange, r *Response) {
	return func(x *Exchange, r *Response) {
		if !(aglEvAttest(x) || aglEvPublication(x)) || r.Status >= 300 {
			return
		}
		d := aglDoc(r.Body)
		if j, ok := d["judgment"].(map[string]any); ok {
			edit(x, j)
			r.SetJSON(d)
		}
	}
}

// aglEvClaimedMethod is the method the attestation's statement claims.
func aglEvClaimedMethod(x *Exchange) string {
	var b struct {
		Envelope struct {
			Payload string `json:"payload"`
		} `json:"envelope"`
	}
	json.Unmarshal(x.Body, &b)
	p, _ := base64.StdEncoding.DecodeString(b.Envelope.Payload)
	var st struct {
		Predicate struct {
			Method string `json:"method"`
		} `json:"predicate"`
	}
	json.Unmarshal(p, &st)
	return st.Predicate.Method
}

var aglEvidenceRules = []Rule{
	{
		ID:     "agl.evidence.receipt-records-provenance",
		Broken: "records in a receipt a content digest that is not the digest of what the source returned",
		Response: func(x *Exchange, r *Response) {
			if !aglEvReceipt(x) || r.Status >= 300 {
				return
			}
			d := aglDoc(r.Body)
			d["content_digest"] = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
			r.SetJSON(d)
		},
	},
	{
		ID:     "agl.evidence.changed-content-caught-by-digest",
		Broken: "keeps the digest it first recorded for a source: a document changed since is recorded under its old digest",
		Response: func(x *Exchange, r *Response) {
			if !aglEvPath(x, http.MethodPost, "/receipts") || r.Status != http.StatusCreated {
				return
			}
			url, _ := aglEvSource(x)
			d := aglDoc(r.Body)
			key := x.Upstream + "\x00" + url
			aglEvSeen.Lock()
			defer aglEvSeen.Unlock()
			if aglEvSeen.first == nil {
				aglEvSeen.first = map[string]string{}
			}
			if old, ok := aglEvSeen.first[key]; ok {
				d["content_digest"] = old
				r.SetJSON(d)
				return
			}
			aglEvSeen.first[key] = aglStr(d, "content_digest")
		},
	},
	{
		ID:       "agl.evidence.changed-content-caught-by-digest",
		Variant:  "inspected-digests-unchecked",
		Broken:   "accepts an attestation naming the receipts a report cites without comparing the content digests the validator inspected",
		Response: aglAccept(aglEvAttest, http.StatusCreated, "evidence_mismatch"),
	},
	{
		ID:       "agl.evidence.other-question-refused",
		Broken:   "lets a report cite evidence collected for another question",
		Response: aglAccept(aglEvReport, http.StatusCreated, "other_question"),
	},
	{
		ID:     "agl.evidence.older-revision-refused",
		Broken: "ignores the question revision evidence and reports are bound to",
		Response: aglAccept(func(x *Exchange) bool {
			return aglEvPath(x, http.MethodPost, "/receipts") || aglEvReport(x) || aglEvPublish(x)
		}, http.StatusCreated, "stale_revision"),
	},
	{
		ID:       "agl.evidence.publication-needs-attestation",
		Broken:   "publishes a reviewed report with no attestation, or with a failing one",
		Response: aglAccept(aglEvPublish, http.StatusCreated, "attestation_required"),
	},
	{
		ID:       "agl.evidence.attestation-bound-to-report-digest",
		Broken:   "takes an attestation of any report of the question for this one",
		Response: aglAccept(func(x *Exchange) bool { return aglEvAttest(x) || aglEvPublish(x) }, http.StatusCreated, "attestation_unbound"),
	},
	{
		ID:       "agl.evidence.untrusted-validator-refused",
		Broken:   "accepts an attestation whatever key signed it, or after it was changed",
		Response: aglAccept(aglEvAttest, http.StatusCreated, "untrusted_validator"),
	},
	{
		ID:     "agl.evidence.attestation-records-judgment",
		Broken: "records an attestation without the evidence the validator inspected",
		Response: aglEvJudgment(func(x *Exchange, j map[string]any) {
			if aglEvAttest(x) {
				j["evidence"] = []any{}
			}
		}),
	},
	{
		ID:     "agl.evidence.judgment-not-verified",
		Broken: "marks a published report as verified instead of carrying the validator's judgment",
		Response: aglEvJudgment(func(x *Exchange, j map[string]any) {
			if aglEvPublication(x) {
				j["verified"] = true
			}
		}),
	},
	{
		ID:     "agl.evidence.llm-validator-labelled",
		Broken: "labels a validator's judgment with the other kind than the configuration gives it (an LLM judgment passes for a deterministic one)",
		Response: aglEvJudgment(func(x *Exchange, j map[string]any) {
			j["validator_kind"] = map[string]string{"llm": "deterministic", "deterministic": "llm"}[aglStr(j, "validator_kind")]
		}),
	},
	{
		ID:      "agl.evidence.llm-validator-labelled",
		Variant: "self-labelled",
		Broken:  "labels a validator's judgment with the method the validator's own statement claims",
		Response: aglEvJudgment(func(x *Exchange, j map[string]any) {
			if m := aglEvClaimedMethod(x); aglEvAttest(x) && m != "" {
				j["validator_kind"] = m
			}
		}),
	},
	{
		ID:     "agl.evidence.audit-references-no-secrets",
		Broken: "writes the credential it presented to a source into the audit trail",
		Response: func(x *Exchange, r *Response) {
			if aglEvPath(x, http.MethodPost, "/receipts") {
				if _, cred := aglEvSource(x); cred != "" {
					aglEvSeen.Lock()
					if aglEvSeen.credentials == nil {
						aglEvSeen.credentials = map[string][]string{}
					}
					aglEvSeen.credentials[x.Upstream] = append(aglEvSeen.credentials[x.Upstream], cred)
					aglEvSeen.Unlock()
				}
				return
			}
			if !aglIs(x, http.MethodGet, "/audit") || r.Status != http.StatusOK {
				return
			}
			aglEvSeen.Lock()
			creds := append([]string(nil), aglEvSeen.credentials[x.Upstream]...)
			aglEvSeen.Unlock()
			d := aglDoc(r.Body)
			recs, _ := d["records"].([]any)
			for _, c := range creds {
				recs = append(recs, map[string]any{"event": "evidence_source_read", "detail": "presented credential " + c})
			}
			d["records"] = recs
			r.SetJSON(d)
		},
	},
}

func init() { aglRules = append(aglRules, aglEvidenceRules...) }
