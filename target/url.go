package target

import (
	"context"
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
	// AGTPBodyForm is the body form the running host declares it reads.
	AGTPBodyForm string
}

func (t *URL) Kind() string { return "url" }

func (t *URL) Acquire(_ context.Context, cfg Config) (*Host, error) {
	if !t.Declared.Satisfies(cfg) {
		return nil, fmt.Errorf("%w: the running host declares another configuration than this scenario needs (%s); a url host cannot be reconfigured, so certify these requirements with the exec or refhost target", ErrUnsatisfiable, t.Declared.Differences(cfg))
	}
	form, err := CheckBodyForm(t.AGTPBodyForm)
	if err != nil {
		return nil, err
	}
	return &Host{HTTP: strings.TrimSuffix(t.HTTP, "/"), AGTP: t.AGTP, AGTPBodyForm: form, Config: t.Declared}, nil
}

func (t *URL) Configurations() []Config { return []Config{t.Declared} }

// RestartWith answers that it cannot: the suite neither stops a url host
// nor gives it another configuration, so scenarios that restart a host
// under a changed configuration are blocked here, never failed.
func (t *URL) RestartWith(context.Context, Config, Config, bool) (*Host, error) {
	return nil, fmt.Errorf("%w: a url host is already running under the configuration it declares, and the suite can neither stop it nor start it again under another; certify these requirements with the refhost, exec or container target", ErrCannotReconfigure)
}

// Subject is undeclared: an address names no build. Name it with --subject.
func (t *URL) Subject() Subject {
	return undeclared("a running host at an address names no build; name it with --subject NAME=sha256:HEX")
}

func (t *URL) Close() error { return nil }
