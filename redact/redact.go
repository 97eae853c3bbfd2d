// Package redact keeps secrets out of what parley shows: failure details,
// the console, reports and the evidence bundle. It removes values the suite
// registered as secret (keys and tokens it generated for a scenario), PEM
// private keys, bearer credentials, and the values of JSON keys that name a
// secret.
package redact

import (
	"regexp"
	"sort"
	"strings"
	"sync"
)

// Mark replaces a redacted value.
const Mark = "[redacted]"

var (
	pemKey = regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----`)
	bearer = regexp.MustCompile(`(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]+`)
	// Keys whose values are credentials, in JSON text (possibly escaped
	// inside another JSON string).
	secretKey = regexp.MustCompile(`(?i)(\\?"(?:api_keys?|[a-z_]*private_key|key_pem|[a-z_]*_key|[a-z_]*token|secret|password|authorization)\\?"\s*:\s*)(\\?"(?:[^"\\]|\\[^"]|\\\\)*\\?"|\[[^\]]*\])`)
	// Keys that end in _key but are not credentials.
	notSecret = map[string]bool{`"idempotency_key"`: true, `"sort_key"`: true, `"destination_key"`: true, `"dedup_key"`: true}
)

// Text redacts the patterns (no registered values) in s.
func Text(s string) string {
	s = pemKey.ReplaceAllString(s, Mark)
	s = bearer.ReplaceAllString(s, "${1}"+Mark)
	s = secretKey.ReplaceAllStringFunc(s, func(m string) string {
		sub := secretKey.FindStringSubmatch(m)
		name := strings.ToLower(strings.TrimSpace(strings.SplitN(sub[1], ":", 2)[0]))
		if notSecret[strings.ReplaceAll(name, `\`, ``)] {
			return m
		}
		q := `"`
		if strings.HasPrefix(sub[2], `\"`) {
			q = `\"`
		}
		return sub[1] + q + Mark + q
	})
	return s
}

// Set is a set of secret values to remove wherever they appear.
type Set struct {
	mu     sync.Mutex
	values []string
}

// Add registers secret values; values shorter than 6 bytes are ignored,
// since removing them would garble unrelated text.
func (s *Set) Add(values ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range values {
		if len(v) >= 6 {
			s.values = append(s.values, v)
		}
	}
}

// Text redacts the registered values and the patterns in t.
func (s *Set) Text(t string) string {
	if s != nil {
		s.mu.Lock()
		vs := append([]string(nil), s.values...)
		s.mu.Unlock()
		// Longest first, so that a secret containing another goes whole.
		sort.Slice(vs, func(i, j int) bool { return len(vs[i]) > len(vs[j]) })
		for _, v := range vs {
			t = strings.ReplaceAll(t, v, Mark)
		}
	}
	return Text(t)
}
