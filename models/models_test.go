package models

import (
	"context"
	"testing"

	"pgregory.net/rapid"
)

func TestCheckFindsShrinksAndReplaysBySeed(t *testing.T) {
	prop := func(t *rapid.T) {
		xs := rapid.SliceOf(rapid.IntRange(0, 100)).Draw(t, "xs")
		for _, x := range xs {
			if x >= 50 {
				t.Fatalf("too big")
			}
		}
	}
	res, err := Check(Options{Settings: Settings{Seed: 7, Budget: 200}}, prop)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Failed || res.Seed == 0 {
		t.Fatalf("no failure found: %+v", res)
	}
	again, err := Check(Options{Settings: Settings{Seed: res.Seed, Budget: 1}}, prop)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Failed {
		t.Errorf("the seed %d of the failure did not fail on replay", res.Seed)
	}
	ok, err := Check(Options{Settings: Settings{Seed: 7, Budget: 20}}, func(t *rapid.T) { rapid.Int().Draw(t, "x") })
	if err != nil || ok.Failed {
		t.Errorf("a property that holds failed: %+v %v", ok, err)
	}
}

func TestCurrentReadsTheEnvironment(t *testing.T) {
	t.Setenv(EnvSeed, "42")
	t.Setenv(EnvBudget, "3")
	s, err := Current()
	if err != nil || s.Seed != 42 || s.Budget != 3 {
		t.Errorf("%+v %v", s, err)
	}
	t.Setenv(EnvBudget, "0")
	if _, err := Current(); err == nil {
		t.Error("a budget of 0 was accepted")
	}
}

// TestSettingsInAContextWinOverConfigure: two runs in one process, each
// with its own settings, do not see each other's.
func TestSettingsInAContextWinOverConfigure(t *testing.T) {
	Configure(Settings{Seed: 7, Budget: 3})
	defer Configure(Settings{})
	s, err := CurrentIn(WithSettings(context.Background(), Settings{Seed: 11}))
	if err != nil || s.Seed != 11 || s.Budget != 3 {
		t.Fatalf("a context's seed with Configure's budget: got %+v, %v", s, err)
	}
	s, err = CurrentIn(context.Background())
	if err != nil || s.Seed != 7 || s.Budget != 3 {
		t.Fatalf("no settings in the context: got %+v, %v, want Configure's", s, err)
	}
}
