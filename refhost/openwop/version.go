package openwop

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// versionGrammar matches the schema's version grammar, so nothing the host
// records can fail its own schema because a peer sent junk.
var versionGrammar = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$`)

func validVersion(v string) bool { return versionGrammar.MatchString(v) }

// compareVersions orders A2A versions ("0.3" < "1.0" < "1.10") and MCP date
// revisions ("2025-03-26" < "2025-06-18") with one rule: split on dots and
// dashes, compare numeric parts as numbers and anything else as text. The
// suite orders versions with wire/version; the host under test keeps its own
// copy on purpose, so that one mistake cannot make both agree.
func compareVersions(a, b string) int {
	split := func(s string) []string {
		return strings.FieldsFunc(s, func(r rune) bool { return r == '.' || r == '-' })
	}
	pa, pb := split(a), split(b)
	for i := 0; i < len(pa) && i < len(pb); i++ {
		na, ea := strconv.ParseUint(pa[i], 10, 64)
		nb, eb := strconv.ParseUint(pb[i], 10, 64)
		switch {
		case ea == nil && eb == nil:
			if na != nb {
				if na < nb {
					return -1
				}
				return 1
			}
		default:
			if c := strings.Compare(pa[i], pb[i]); c != 0 {
				return c
			}
		}
	}
	switch {
	case len(pa) < len(pb):
		return -1
	case len(pa) > len(pb):
		return 1
	}
	return strings.Compare(a, b)
}

// Refusal reasons the host records. below-floor is the spec's; the others
// are this host's own and documented in docs/openwop-host.md.
const (
	reasonBelowFloor     = "below-floor"
	reasonMalformed      = "malformed-version"
	reasonUnauthPinned   = "unauthenticated-below-preferred"
	reasonUnsupported    = "unsupported-version"
	reasonPeerUnnamed    = "peer-named-no-version"
	reasonPeerRefused    = "peer-refused"
	reasonPeerUnreadable = "peer-unreachable"
	reasonConflict       = "conflicting-versions"
)

// versionPolicy is a validated VersionRange.
type versionPolicy struct {
	protocol  string
	supported []string // ascending, all within [floor, preferred]
	preferred string
	floor     string
}

func newVersionPolicy(protocol string, r, def VersionRange) (versionPolicy, error) {
	if len(r.Versions) == 0 && r.Preferred == "" && r.Floor == "" {
		r = def
	}
	p := versionPolicy{protocol: protocol, preferred: r.Preferred, floor: r.Floor}
	if len(r.Versions) == 0 {
		return p, fmt.Errorf("%s: versions is empty", protocol)
	}
	vs := slices.Clone(r.Versions)
	for _, v := range vs {
		if !validVersion(v) {
			return p, fmt.Errorf("%s: invalid version %q", protocol, v)
		}
	}
	slices.SortFunc(vs, compareVersions)
	vs = slices.CompactFunc(vs, func(a, b string) bool { return compareVersions(a, b) == 0 })
	if p.floor == "" {
		p.floor = vs[0]
	}
	if p.preferred == "" {
		p.preferred = vs[len(vs)-1]
	}
	if !slices.Contains(vs, p.floor) || !slices.Contains(vs, p.preferred) {
		return p, fmt.Errorf("%s: floor %q and preferred %q must both be listed in versions", protocol, p.floor, p.preferred)
	}
	if compareVersions(p.floor, p.preferred) > 0 {
		return p, fmt.Errorf("%s: floor %q is above preferred %q", protocol, p.floor, p.preferred)
	}
	for _, v := range vs {
		if compareVersions(v, p.floor) >= 0 && compareVersions(v, p.preferred) <= 0 {
			p.supported = append(p.supported, v)
		}
	}
	return p, nil
}

// decision is the outcome of one negotiation, before it becomes a payload.
type decision struct {
	accepted bool
	version  string // set when accepted
	reason   string // set when refused
	floor    string // set on a below-floor refusal
}

func (p versionPolicy) refuse(reason string) decision {
	d := decision{reason: reason}
	if reason == reasonBelowFloor {
		d.floor = p.floor
	}
	return d
}

// answer decides an inbound negotiation, the host being the server. An empty
// requested means the caller named no version. An unauthenticated caller is
// never given less than preferred: without a tenant nobody could ever see the
// record of such a downgrade.
func (p versionPolicy) answer(requested string, authenticated bool) decision {
	if requested == "" {
		return decision{accepted: true, version: p.preferred}
	}
	if !validVersion(requested) {
		return p.refuse(reasonMalformed)
	}
	if compareVersions(requested, p.floor) < 0 {
		return p.refuse(reasonBelowFloor)
	}
	if compareVersions(requested, p.preferred) >= 0 {
		// Newer than (or equal to) anything the host speaks: it offers its best.
		return decision{accepted: true, version: p.preferred}
	}
	if !authenticated {
		return p.refuse(reasonUnauthPinned)
	}
	// Between floor and preferred: the newest supported version not newer
	// than what was asked. The floor itself is supported, so one exists.
	best := p.floor
	for _, v := range p.supported {
		if compareVersions(v, requested) <= 0 {
			best = v
		}
	}
	return decision{accepted: true, version: best}
}

// check decides an outbound negotiation: the host asked a peer for a version
// and the peer answered with the version it will speak.
func (p versionPolicy) check(answered string) decision {
	switch {
	case answered == "":
		return p.refuse(reasonPeerUnnamed)
	case !validVersion(answered):
		return p.refuse(reasonMalformed)
	case compareVersions(answered, p.floor) < 0:
		return p.refuse(reasonBelowFloor)
	case !slices.ContainsFunc(p.supported, func(v string) bool { return compareVersions(v, answered) == 0 }):
		return p.refuse(reasonUnsupported)
	}
	return decision{accepted: true, version: answered}
}
