package sabotage

import (
	"fmt"
	"net/http"
	"sync/atomic"

	agtp "github.com/parley-conformance/parley/wire/agtp"
)

// Faithful readings are not sabotage. Each is the reference host made to
// take another reading the text allows, where the text leaves a choice open
// (whether to retry, which reason or member name to use, which status
// refuses, whether to delete). A faithful host of that reading must pass
// every spec profile of its family (the GUIDE's fairness rule); only the
// family's <family>-parley-binding profile, whose ids are parley's own
// choices, may fail it. They are kept apart from Rules(): the sabotage
// matrix holds every rule to failing its id, and a reading must fail none.
//
// The readings are written as rules (configuration, request and response
// rewrites through the same proxy), so a reading changes only what the
// host says on the wire, as a host written to that reading would.

// Reading is one faithful reading of the text.
type Reading struct {
	// Name identifies the reading: its family and what the host chose.
	Name string
	// Family is the family whose spec profiles the reading must pass.
	Family string
	// Host says what the host does, and why the text allows it.
	Host string
	// Rule is the host's behaviour: its ID is "reading:" + Name, never a
	// requirement id.
	Rule Rule
	// Binding lists the binding ids (basis binding, in the family's
	// <family>-parley-binding profile) parley's own choice makes this
	// reading fail: the sign that the reading took effect. A reading
	// without one counts its own rewrites instead (Applied).
	Binding []string
	// Alone, when set, says why the reading runs on a host of its own: the
	// readings of a family otherwise run together (Combine), one host
	// making all their choices at once, and this one would be hidden by
	// another's.
	Alone string
	// applied counts the exchanges the reading changed.
	applied *atomic.Int64
}

// Applied is how many exchanges the reading changed since it was made (for
// readings whose effect no binding id shows).
func (r Reading) Applied() int64 {
	if r.applied == nil {
		return 0
	}
	return r.applied.Load()
}

// FaithfulReadings returns a fresh set of readings (their counters at zero).
func FaithfulReadings() []Reading {
	var out []Reading
	add := func(r Reading) {
		r.Rule.ID = "reading:" + r.Name
		if r.Rule.Broken == "" {
			r.Rule.Broken = r.Host
		}
		out = append(out, r)
	}

	// --- AGL ------------------------------------------------------------

	// Section 8 permits automatic retry under conditions; it never
	// requires one. (A proxy that rewrote every contract to one attempt
	// would merge declarations the host must tell apart, so the host is
	// configured instead, as parley's binding rule for retrying is.)
	add(readingOf("agl.never-retries", "agl", "agl.retry.retries-while-allowed",
		"never retries an uncertain send: it takes no destination for one that deduplicates (honours_idempotency_key false), so every Unknown waits for reconciliation"))

	// Recovery may resume only what is safe; resuming is never required.
	neverResumes := readingOf("agl.never-resumes", "agl", "agl.recovery.resumes-deduplicated-send",
		"never resends on recovery: an interrupted send stays Unknown for reconciliation, even one a deduplicating destination would settle")
	neverResumes.Alone = "agl.never-retries takes deduplication from every destination, and recovery resumes only deduplicated sends: beside it, this reading would never be exercised"
	add(neverResumes)

	// Section 8 requires keeping pending intents and consumed-permit
	// tombstones; nothing requires deleting what is no longer needed.
	keeps := new(atomic.Int64)
	add(Reading{Name: "agl.keeps-everything", Family: "agl", applied: keeps,
		Host: "never removes a record: its retention period is longer than any run, so a sweep deletes nothing (expired permits stay readable)",
		Rule: Rule{
			Config: func(c map[string]map[string]any) {
				if c["agl"] != nil {
					c["agl"]["retention_ms"] = float64(1 << 50)
				}
			},
			Response: func(x *Exchange, r *Response) {
				if x.Method == http.MethodPost && x.Path == "/conformance/seams/agl/retention" && r.Status == http.StatusOK {
					keeps.Add(1)
				}
			},
		}})

	// Section 4.3 says delegation never widens scope or expiry; it does
	// not say revoking a grant revokes what was delegated from it.
	add(readingOf("agl.revocation-stays-put", "agl", "agl.authority.revocation-cascades",
		"revokes only the grant named: a grant delegated from it keeps its own validity"))

	// Section 10 lists adding authority or effects, strengthening
	// preconditions and changing states or approval bindings as
	// compatibility changes; removing authority and changing the
	// idempotency contract are not in the list.
	add(readingOf("agl.compat-section-10-list", "agl", "agl.contract.interface-binding-changes",
		"takes section 10's list as the whole list: removing authority or changing the idempotency contract registers under a minor version"))

	// --- AGTP -----------------------------------------------------------

	// The only definition the text gives for a pair the server cannot
	// build is composition-impossible (PROPOSE step 6).
	composition := new(atomic.Int64)
	add(Reading{Name: "agtp.composition-impossible", Family: "agtp", applied: composition,
		Host: "answers a recipe whose composition fails 464 composition-impossible, and records that reason for INSPECT target=rcns-attempt",
		Rule: Rule{AGTP: func(x *AGTPExchange, r *agtp.Response) {
			switch {
			case isGate(x) && r.Status == 464 && agtpReason(r) == "synthesis-error":
				renameReason(r, "synthesis-error", "composition-impossible")
				composition.Add(1)
			case isFloor(x, "INSPECT", "rcns-attempt") && r.Status == 200:
				m := agtpJSON(r)
				changed := false
				objectsIn(m, func(o map[string]any) {
					if _, ok := o["attempt_id"]; ok && o["reason"] == "synthesis-error" {
						o["reason"] = "composition-impossible"
						changed = true
					}
				})
				if changed {
					setAGTPJSON(r, m)
				}
			}
		}}})

	// Nothing names the members of an attempt record; a public server
	// says method_attempted and path_attempted.
	members := new(atomic.Int64)
	add(Reading{Name: "agtp.attempt-member-names", Family: "agtp", applied: members,
		Host: "names the attempt record's members method_attempted and path_attempted (and status_code), as a public AGTP server does",
		Rule: Rule{AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if !isFloor(x, "INSPECT", "rcns-attempt") || r.Status != 200 {
				return
			}
			m := agtpJSON(r)
			changed := false
			objectsIn(m, func(o map[string]any) {
				if _, ok := o["attempt_id"]; !ok {
					return
				}
				for from, to := range map[string]string{"method": "method_attempted", "path": "path_attempted", "status": "status_code"} {
					if v, ok := o[from]; ok {
						o[to] = v
						delete(o, from)
						changed = true
					}
				}
			})
			if changed {
				setAGTPJSON(r, m)
				members.Add(1)
			}
		}}})

	// A persisted synthesis is reflected in later manifests; nothing says
	// what else a manifest lists.
	manifest := new(atomic.Int64)
	add(Reading{Name: "agtp.manifest-syntheses-only", Family: "agtp", applied: manifest,
		Host: "lists in DISCOVER / only the endpoints synthesis persisted, not its configured Tier A endpoints",
		Rule: Rule{AGTP: func(x *AGTPExchange, r *agtp.Response) {
			if x.Request.Method != "DISCOVER" || x.Request.Path != "/" || r.Status != 200 {
				return
			}
			m := agtpJSON(r)
			changed := false
			objectsIn(m, func(o map[string]any) {
				eps, ok := o["endpoints"].([]any)
				if !ok {
					return
				}
				kept := []any{}
				for _, e := range eps {
					if ep, _ := e.(map[string]any); ep != nil && ep["synthesis_id"] != nil {
						kept = append(kept, e)
					}
				}
				if len(kept) != len(eps) {
					o["endpoints"] = kept
					changed = true
				}
			})
			if changed {
				setAGTPJSON(r, m)
				manifest.Add(1)
			}
		}}})

	// The text names no status for a sweep by a caller without
	// inspect:all; the wire notes refuse the analogous SUSPEND 403.
	add(readingOf("agtp.sweep-refused-403", "agtp", "agtp.rcns.sweep.inspect-all-refusal-status",
		"refuses a sweep by a caller without inspect:all with 403 forbidden"))

	// --- ContractRefine -------------------------------------------------

	// The text bounds repair attempts per session and plan; it does not
	// say the count outlives a restart.
	add(readingOf("contractrefine.repair-budget-in-memory", "contractrefine", "contractrefine.preflight.post.repair-budget-survives-restart",
		"keeps repair budgets in memory: a restart starts every session's count afresh"))

	// The mode ladder lists a deny frame for a call missing a required
	// preflight under enforce; under advisory the text asks for none.
	noDenyFrame := new(atomic.Int64)
	add(Reading{Name: "contractrefine.advisory-required-preflight-silent", Family: "contractrefine", applied: noDenyFrame,
		Host: "in advisory mode writes no deny frame for a call missing a preflight its policy bundle requires (it lets the call continue to policy, as advisory does)",
		Rule: Rule{Response: func(x *Exchange, r *Response) {
			if mode(x) != "advisory" {
				return
			}
			frames(func(kind string, a map[string]any) []map[string]any {
				if kind == "autonomy.decision" && a["outcome"] == "deny" && a["reason"] == "contract: preflight_required" {
					noDenyFrame.Add(1)
					return nil
				}
				return []map[string]any{a}
			})(x, r)
		}},
		Binding: []string{"contractrefine.tool.advisory-required-preflight-deny-frame"}})

	return out
}

// readingOf is the reading a binding id's own rule already is: the host
// that rule describes takes a reading the text allows, and only parley's
// binding refuses it. The rule's hooks are reused; its id is not.
func readingOf(name, family, bindingID, host string) Reading {
	for _, r := range Rules() {
		if r.Key() == bindingID {
			r.Variant = ""
			r.Broken = host
			return Reading{Name: name, Family: family, Host: host, Rule: r, Binding: []string{bindingID}}
		}
	}
	panic(fmt.Sprintf("sabotage: the reading %s reuses the rule of %s, which is gone", name, bindingID))
}

// renameReason rewrites a refusal's reason in place, wherever the host put
// it (error.reason or a top-level reason), keeping the rest of the body and
// every header (the RCNS-Attempt-Id among them).
func renameReason(r *agtp.Response, from, to string) {
	m := agtpJSON(r)
	if m == nil {
		return
	}
	if e, ok := m["error"].(map[string]any); ok && e["reason"] == from {
		e["reason"] = to
	}
	if m["reason"] == from {
		m["reason"] = to
	}
	setAGTPJSON(r, m)
}
