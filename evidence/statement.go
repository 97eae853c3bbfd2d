// Package evidence builds, signs, verifies and renders the evidence bundle:
// an in-toto Statement v1 whose predicate lists, requirement by requirement,
// what the host did, wrapped in a DSSE envelope signed with ed25519.
package evidence

import (
	"encoding/json"
	"sort"
	"time"

	"github.com/parley-conformance/parley/redact"
	"github.com/parley-conformance/parley/scenarios"
	"github.com/parley-conformance/parley/verdict"
)

// Identifiers of what a bundle contains.
const (
	StatementType = "https://in-toto.io/Statement/v1"
	PredicateType = "https://parley.dev/evidence/v2"
	PayloadType   = "application/vnd.in-toto+json"
	SuiteName     = "parley"
)

// Statement is an in-toto Statement v1.
type Statement struct {
	Type          string    `json:"_type"`
	Subject       []Subject `json:"subject"`
	PredicateType string    `json:"predicateType"`
	Predicate     Predicate `json:"predicate"`
}

// Undeclared names the subject of a run whose host build nobody named: it
// carries no digest, and certifies no build.
const Undeclared = "undeclared"

// Subject is the host build the bundle certifies.
type Subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// Predicate is parley's evidence: schemas/evidence-predicate.json.
type Predicate struct {
	Suite          SuiteInfo  `json:"suite"`
	RegistryDigest string     `json:"registryDigest"`
	CorpusDigest   string     `json:"corpusDigest"`
	Target         TargetInfo `json:"target"`
	Seed           int64      `json:"seed"`
	TagFilter      string     `json:"tagFilter"`
	Profiles       []string   `json:"profiles"`
	// AllowBlocked records that the run was asked to accept blocked
	// requirements (a partial certification): without it, blocked fails.
	AllowBlocked bool          `json:"allowBlocked"`
	StartedAt    time.Time     `json:"startedAt"`
	FinishedAt   time.Time     `json:"finishedAt"`
	Signing      SigningInfo   `json:"signing"`
	Requirements []verdict.Row `json:"requirements"`
	// Facts are what the run learned about the host where a spec leaves a
	// choice open (the AGTP body form it was sent, where it put a reason).
	Facts             map[string][]string `json:"facts"`
	Unwitnessable     []Unwitnessable     `json:"unwitnessable"`
	Totals            Totals              `json:"totals"`
	ProfilesCertified []string            `json:"profilesCertified"`
}

// SuiteInfo names the suite build that produced the bundle.
type SuiteInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Commit  string `json:"commit"`
}

// TargetInfo says how the host was driven.
type TargetInfo struct {
	Kind           string       `json:"kind"`
	Note           string       `json:"note,omitempty"`
	Configurations []ConfigInfo `json:"configurations"`
	// HostsStarted and Restarts count the hosts the suite started (fresh
	// ones) and restarted on their state, for targets that start hosts.
	HostsStarted *int `json:"hostsStarted,omitempty"`
	Restarts     *int `json:"restarts,omitempty"`
	// Isolate records a run that gave every scenario a host of its own.
	Isolate bool `json:"isolate,omitempty"`
	// StartTimeout is how long each host was given to print its ready
	// line (a Go duration), for targets that start hosts: a host slower
	// than it failed to start.
	StartTimeout string `json:"startTimeout,omitempty"`
}

// ConfigInfo is one host configuration the run used.
type ConfigInfo struct {
	Digest   string          `json:"digest"`
	Document json.RawMessage `json:"document"`
}

// SigningInfo says which key signed; an ephemeral key proves only that the
// bundle is intact, not who produced it.
type SigningInfo struct {
	KeyID     string `json:"keyId"`
	Ephemeral bool   `json:"ephemeral"`
}

// Unwitnessable is a requirement the suite cannot observe, with why.
type Unwitnessable struct {
	ID        string `json:"id"`
	Rationale string `json:"rationale"`
}

// Totals counts requirement rows by verdict.
type Totals = verdict.Totals

// Count tallies rows.
func Count(rows []verdict.Row) Totals { return verdict.Count(rows) }

// Run is what a finished run hands the evidence: plain data, so that this
// package needs neither the runner nor the targets (a verifier links only
// the verdict model, the registry and the schemas).
type Run struct {
	Seed     int64
	Tags     string
	Profiles []string
	Started  time.Time
	Finished time.Time
	Rows     []verdict.Row
	// AllowBlocked records that the run accepted blocked requirements.
	AllowBlocked bool
	// SuiteVersion and SuiteCommit name the parley build that ran.
	SuiteVersion, SuiteCommit string
	// Facts are what the run learned about the host: the choices it
	// declared where a spec leaves one open, what the suite saw it do.
	Facts map[string][]string
}

// Host is what the target says of the host it drove.
type Host struct {
	Kind    string
	Subject Subject
	// Note qualifies the subject (for example, that no build was named).
	Note string
	// Configurations are the configuration documents the host was started
	// with, keyed by their digest, as the host received them.
	Configurations map[string][]byte
	// HostsStarted and Restarts count what the target started; negative
	// when it starts no hosts (a url target).
	HostsStarted, Restarts int
	Isolate                bool
	// StartTimeout bounds a host's start (0: the target starts none, or
	// in-process).
	StartTimeout time.Duration
}

// Build assembles the statement for a finished run.
func Build(reg *scenarios.Registry, corpus *scenarios.Corpus, run Run, host Host, signing SigningInfo) Statement {
	p := Predicate{
		Suite:          SuiteInfo{Name: SuiteName, Version: orUnknown(run.SuiteVersion), Commit: orUnknown(run.SuiteCommit)},
		RegistryDigest: reg.Digest(),
		CorpusDigest:   corpus.Digest(),
		Target:         TargetInfo{Kind: host.Kind, Note: host.Note, Configurations: []ConfigInfo{}, Isolate: host.Isolate},
		Seed:           run.Seed,
		TagFilter:      run.Tags,
		Profiles:       append([]string{}, run.Profiles...),
		AllowBlocked:   run.AllowBlocked,
		StartedAt:      run.Started,
		FinishedAt:     run.Finished,
		Signing:        signing,
		Requirements:   run.Rows,
		Facts:          map[string][]string{},
		Unwitnessable:  []Unwitnessable{},
		Totals:         Count(run.Rows),
	}
	for k, vs := range run.Facts {
		p.Facts[k] = append([]string{}, vs...)
	}
	if host.StartTimeout > 0 {
		p.Target.StartTimeout = host.StartTimeout.String()
	}
	if host.HostsStarted >= 0 && host.Restarts >= 0 {
		hs, rs := host.HostsStarted, host.Restarts
		p.Target.HostsStarted, p.Target.Restarts = &hs, &rs
	}
	for digest, doc := range host.Configurations {
		// The digest is of the document as the host received it; the
		// document shown is redacted of keys and credentials.
		p.Target.Configurations = append(p.Target.Configurations, ConfigInfo{Digest: digest, Document: json.RawMessage(redact.Text(string(doc)))})
	}
	sort.Slice(p.Target.Configurations, func(i, j int) bool {
		return p.Target.Configurations[i].Digest < p.Target.Configurations[j].Digest
	})
	for _, e := range reg.Entries {
		if e.Status == scenarios.StatusActive && e.Witness == scenarios.WitnessUnwitnessable {
			p.Unwitnessable = append(p.Unwitnessable, Unwitnessable{ID: e.ID, Rationale: e.Rationale})
		}
	}
	p.ProfilesCertified = certified(reg, run.Rows)
	if p.Requirements == nil {
		p.Requirements = []verdict.Row{}
	}
	return Statement{
		Type:          StatementType,
		Subject:       []Subject{host.Subject},
		PredicateType: PredicateType,
		Predicate:     p,
	}
}

// certified lists the profiles whose every scored requirement passed (or is
// inapplicable to the host) in this run; a filtered run that left one out
// certifies nothing for that profile.
func certified(reg *scenarios.Registry, rows []verdict.Row) []string {
	result := map[string]string{}
	for _, r := range rows {
		result[r.ID] = r.Result
	}
	ok := map[string]bool{}
	for _, e := range reg.Entries {
		if !e.Scored() {
			continue
		}
		if _, seen := ok[e.Profile]; !seen {
			ok[e.Profile] = true
		}
		if r := result[e.ID]; r != verdict.ExecutedPass && r != verdict.Inapplicable {
			ok[e.Profile] = false
		}
	}
	out := []string{}
	for p, good := range ok {
		if good {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
