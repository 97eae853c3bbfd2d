package agl

import (
	"context"
	"encoding/json"

	"github.com/parley-conformance/parley/fixtures"
	"github.com/parley-conformance/parley/schemas"
	"github.com/parley-conformance/parley/steps"
	"github.com/parley-conformance/parley/target"
)

// A restart of the same host under a changed deployment (issue 24 rule 4,
// issue 20): while a send is claimed, the operator changes the host's
// deployment policy, or moves the scenario's email account to another
// destination, and the host is started again on its store under that
// configuration (the target's RestartWith). What the store holds was
// approved under a deployment the restarted host does not run.
func registerRestart(c *steps.Catalog) {
	c.When(`^the operator (changes the host's deployment policy to allow recipients only in "[^"]*"|moves the host's email account to another destination) for its next start$`, func(ctx context.Context, how string) error {
		s, w := st(ctx), steps.From(ctx)
		if !s.described {
			return steps.Fault("describe the AGL host first")
		}
		var deployment []string
		var moved *destination
		if m := quoted.FindStringSubmatch(how); m != nil {
			deployment = csv(m[1])
		} else {
			if s.mail2 != nil {
				return steps.Fault("the scenario already leased a second destination")
			}
			roster := fixtures.AGLRosterEmail
			if s.dedup {
				roster = fixtures.AGLRosterEmailDedup
			}
			var err error
			if s.mail2, err = leaseDestination(w, roster); err != nil {
				return err
			}
			moved = s.mail2
		}
		return w.ChangeAtRestart(func(cfg target.Config) (target.Config, error) {
			return s.changedDeployment(cfg, moved, deployment)
		})
	})
}

// changedDeployment is cfg with the AGL section's deployment policy
// replaced (deployment) or the scenario's email account at another URL
// (moved): the same document otherwise, state directory and seams
// included, held to the published configuration schema.
func (s *state) changedDeployment(cfg target.Config, moved *destination, deployment []string) (target.Config, error) {
	var doc map[string]any
	if err := json.Unmarshal(cfg.JSON(), &doc); err != nil {
		return target.Config{}, steps.Fault("the host's configuration does not decode: %v", err)
	}
	sec, _ := doc[family].(map[string]any)
	if sec == nil {
		return target.Config{}, steps.Fault("the host's configuration has no AGL section")
	}
	if moved != nil {
		if err := moveAccount(sec, s.mail.account, moved.url); err != nil {
			return target.Config{}, err
		}
	}
	if deployment != nil {
		sec["deployment"] = map[string]any{"allowed_recipient_domains": deployment}
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return target.Config{}, steps.Fault("the changed configuration does not encode: %v", err)
	}
	changed, err := target.ParseConfig(raw)
	if err != nil {
		return target.Config{}, steps.Fault("the changed configuration does not encode: %v", err)
	}
	if err := schemas.ValidateJSON("host-config.json", changed.JSON()); err != nil {
		return target.Config{}, steps.Fault("the changed configuration does not satisfy schemas/host-config.json: %v", err)
	}
	return changed, nil
}
