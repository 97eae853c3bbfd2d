package target

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// URL is a host that is already running with a configuration it declares.
// Scenarios that need another configuration are blocked: the suite cannot
// reconfigure a host it does not run.
type URL struct {
	HTTP     string
	AGTP     string
	Declared Config
}

func (t *URL) Kind() string { return "url" }

func (t *URL) Acquire(_ context.Context, cfg Config) (*Host, error) {
	if !t.Declared.Satisfies(cfg) {
		return nil, fmt.Errorf("%w: the running host declares another configuration than this scenario needs (%s); a url host cannot be reconfigured, so certify these requirements with the exec or refhost target", ErrUnsatisfiable, t.Declared.Differences(cfg))
	}
	return &Host{HTTP: strings.TrimSuffix(t.HTTP, "/"), AGTP: t.AGTP, Config: t.Declared}, nil
}

func (t *URL) Configurations() []Config { return []Config{t.Declared} }

// digestOfString is the hex SHA-256 of s, for subjects that are named
// rather than built.
func digestOfString(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Subject names the host by its address; the implementer should name the
// build explicitly with --subject, since an address proves nothing.
func (t *URL) Subject() Subject {
	id := t.HTTP + " " + t.AGTP
	return Subject{
		Name:   strings.TrimSpace(id),
		Digest: map[string]string{"sha256": digestOfString(id)},
		Note:   "digest of the host address, not of a build; name the build with --subject",
	}
}

func (t *URL) Close() error { return nil }
