package steps

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/cucumber/godog"
)

// TestBindStepsKeepsGodogsMatching runs scenarios through godog with only the
// definitions their texts match bound: a matched step runs with its
// arguments, a text nothing matches is still undefined, and a text two
// definitions match is still ambiguous.
func TestBindStepsKeepsGodogsMatching(t *testing.T) {
	c := &Catalog{}
	var (
		mu  sync.Mutex
		got []string
	)
	c.When(`^the agent says "([^"]*)"$`, func(_ context.Context, s string) error {
		mu.Lock()
		got = append(got, s)
		mu.Unlock()
		return nil
	})
	c.When(`^a step two definitions match$`, func(context.Context) error { return nil })
	c.When(`^a step two definitions (?:match|fit)$`, func(context.Context) error { return nil })
	c.Then(`^nothing else is bound$`, func(context.Context) error { return nil })

	const feature = `Feature: binding
  Scenario: matched
    When the agent says "hello"
  Scenario: undefined
    When a step no definition matches
  Scenario: ambiguous
    When a step two definitions match
`
	errs := map[string]error{}
	suite := godog.TestSuite{
		ScenarioInitializer: func(sc *godog.ScenarioContext) {
			sc.Before(func(ctx context.Context, p *godog.Scenario) (context.Context, error) {
				var texts []string
				for _, st := range p.Steps {
					texts = append(texts, st.Text)
				}
				c.BindSteps(sc, texts)
				return With(ctx, NewWorld(nil, Scenario{})), nil
			})
			sc.After(func(ctx context.Context, p *godog.Scenario, err error) (context.Context, error) {
				mu.Lock()
				errs[p.Name] = err
				mu.Unlock()
				return ctx, nil
			})
		},
		Options: &godog.Options{
			Format: "progress", Output: io.Discard, Strict: true, NoColors: true,
			FeatureContents: []godog.Feature{{Name: "binding.feature", Contents: []byte(feature)}},
		},
	}
	suite.Run()
	if len(got) != 1 || got[0] != "hello" {
		t.Errorf("the matched step ran with %q, want [hello]", got)
	}
	if errs["matched"] != nil {
		t.Errorf("the matched scenario ended with %v", errs["matched"])
	}
	if !errors.Is(errs["undefined"], godog.ErrUndefined) {
		t.Errorf("a step no definition matches ended with %v, want godog's undefined", errs["undefined"])
	}
	if !errors.Is(errs["ambiguous"], godog.ErrAmbiguous) {
		t.Errorf("a step two definitions match ended with %v, want godog's ambiguous", errs["ambiguous"])
	}
	if n := len(c.matching("a step two definitions match")); n != 2 {
		t.Errorf("the ambiguous text matches %d definitions, want 2", n)
	}
}

// TestWaitReadsTheDeclaredWaits: a step's declared wait, fixed or read from
// the number its text carries, is what the catalog reports for a text that
// step matches; a text no waiting step matches waits nothing.
func TestWaitReadsTheDeclaredWaits(t *testing.T) {
	c := &Catalog{}
	c.When(`^a lifetime runs out$`, func(context.Context) error { return nil }).Waits(2 * time.Second)
	c.When(`^the host will pause for (\d+) ms$`, func(context.Context, int) error { return nil }).WaitsAsWritten(time.Millisecond)
	c.When(`^the agent (\w+) for (\d+) seconds$`, func(context.Context, string, int) error { return nil }).WaitsAsWritten(time.Second)
	c.Then(`^nothing waits$`, func(context.Context) error { return nil })
	for text, want := range map[string]time.Duration{
		"a lifetime runs out":             2 * time.Second,
		"the host will pause for 1500 ms": 1500 * time.Millisecond,
		"the agent sleeps for 3 seconds":  3 * time.Second,
		"nothing waits":                   0,
		"no step matches this":            0,
	} {
		if got := c.Wait(text); got != want {
			t.Errorf("Wait(%q) = %v, want %v", text, got, want)
		}
	}
}
