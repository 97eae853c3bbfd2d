package target

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigIsCanonical(t *testing.T) {
	a, err := ParseConfig([]byte(`{"b": {"y": 1, "x": [2, 1]}, "a": {}, "seams": true}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseConfig([]byte(`{"seams":true,"a":{},"b":{"x":[2,1],"y":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest() != b.Digest() || string(a.JSON()) != `{"a":{},"b":{"x":[2,1],"y":1},"seams":true}` {
		t.Fatalf("%s vs %s", a.JSON(), b.JSON())
	}
	for _, bad := range []string{`[]`, `null`, `{"seams": "yes"}`, `{`} {
		if _, err := ParseConfig([]byte(bad)); err == nil {
			t.Errorf("%s: want an error", bad)
		}
	}
}

func TestSatisfies(t *testing.T) {
	host, _ := ParseConfig([]byte(`{"x": {"mode": "a"}, "y": {}, "seams": true}`))
	for doc, want := range map[string]bool{
		`{"x": {"mode": "a"}}`:                true,
		`{"x": {"mode": "a"}, "seams": true}`: true,
		`{"x": {"mode": "b"}}`:                false,
		`{"x": {}}`:                           false,
		`{"z": {}}`:                           false,
	} {
		want2, _ := ParseConfig([]byte(doc))
		if host.Satisfies(want2) != want {
			t.Errorf("%s: Satisfies != %v", doc, want)
		}
	}
}

func TestExecHostThatNeverSaysReadyTimesOut(t *testing.T) {
	t.Parallel()
	// The host never exits by itself: only the start timeout can end the
	// wait, however busy the machine, and the error must say so.
	e, err := NewExec("sleep 3600 #")
	if err != nil {
		t.Fatal(err)
	}
	e.StartTimeout = 300 * time.Millisecond
	defer e.Close()
	cfg, _ := ParseConfig([]byte(`{"x":{}}`))
	_, err = e.Acquire(context.Background(), cfg)
	// The failure says, by its type, that the host printed no ready line
	// within the bound, and which bound.
	var se *StartError
	if !errors.As(err, &se) || se.TimedOut != 300*time.Millisecond {
		t.Fatalf("want a StartError whose start timeout of 300ms ran out, got %#v", err)
	}
}

func TestExecHostReceivesItsConfigurationAndIsStopped(t *testing.T) {
	t.Parallel()
	// A shell "host" that echoes its config into its log, claims readiness
	// and notes the SIGTERM that stops it (sleeping in the background, so
	// the trap runs at once).
	term := filepath.Join(t.TempDir(), "term")
	e, err := NewExec(`trap 'echo got >` + term + `; exit 0' TERM; cat >&2 <"$1"; echo '{"parley":"ready","http":"http://127.0.0.1:9/"}'; sleep 30 & wait #`)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := ParseConfig([]byte(`{"x":{"mode":"enforce"}}`))
	h, err := e.Acquire(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if h.HTTP != "http://127.0.0.1:9" {
		t.Fatalf("HTTP %q", h.HTTP)
	}
	again, _ := e.Acquire(context.Background(), cfg)
	if again != h {
		t.Fatal("one configuration started two hosts")
	}
	// The configuration went to stderr before the ready line; the log
	// takes it in as the target reads stderr, however late.
	for {
		logs, _ := h.Logs()
		if strings.Contains(strings.Join(logs, "\n"), `"mode":"enforce"`) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(term); err != nil || strings.TrimSpace(string(b)) != "got" {
		t.Fatalf("the host was not stopped by SIGTERM (its trap wrote %q, %v): the target signals its process group", b, err)
	}
}
