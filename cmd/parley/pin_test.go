package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

const modulePath = "github.com/parley-conformance/parley"

// pinRef finds a pinned parley version in a doc: `module/any/pkg@version`.
var pinRef = regexp.MustCompile(regexp.QuoteMeta(modulePath) + `(?:/[A-Za-z0-9_./-]*)?@(v[0-9][0-9A-Za-z.+-]*)`)

// pseudoVersion is a Go pseudo-version (v0.0.0-20261201174216-610c020385c1,
// or vX.Y.Z-pre.0.ts-hash after a tag): its UTC commit time and 12-hex
// commit prefix.
var pseudoVersion = regexp.MustCompile(`^v\d+\.\d+\.\d+-(?:[0-9A-Za-z.-]*\.)?(\d{14})-([0-9a-f]{12})$`)

// pinnedCommit is what a pin resolves to in this repository.
type pinnedCommit struct {
	Version string
	Commit  string // full hash
	Time    time.Time
}

func git(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", "../.."}, args...)...).Output()
	return strings.TrimSpace(string(out)), err
}

// resolvePin checks that version names something this repository's history
// has, as the Go module proxy would serve it from a clone: a tag, or a
// pseudo-version whose commit exists, is reachable from HEAD, and whose
// timestamp is the commit's UTC commit time. It skips when the checkout
// cannot say (no git, a shallow clone missing the commit).
func resolvePin(t *testing.T, version string) pinnedCommit {
	t.Helper()
	if _, err := git(t, "rev-parse", "HEAD"); err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	m := pseudoVersion.FindStringSubmatch(version)
	if m == nil {
		full, err := git(t, "rev-parse", "-q", "--verify", "refs/tags/"+version+"^{commit}")
		if err != nil {
			t.Fatalf("pins %s, which is neither a tag of this repository nor a pseudo-version", version)
		}
		return pinnedCommit{Version: version, Commit: full}
	}
	full, err := git(t, "rev-parse", "-q", "--verify", m[2]+"^{commit}")
	if err != nil {
		if shallow, _ := git(t, "rev-parse", "--is-shallow-repository"); shallow == "true" {
			t.Skipf("pin %s: commit %s is not in this shallow clone (fetch the history to check it)", version, m[2])
		}
		t.Fatalf("pins %s, but this repository has no commit %s", version, m[2])
	}
	if _, err := git(t, "merge-base", "--is-ancestor", full, "HEAD"); err != nil {
		t.Fatalf("pins %s, whose commit %s is not in the history of HEAD", version, full)
	}
	ts, err := git(t, "log", "-1", "--format=%ct", full)
	if err != nil {
		t.Fatal(err)
	}
	var secs int64
	if err := json.Unmarshal([]byte(ts), &secs); err != nil {
		t.Fatalf("commit time %q: %v", ts, err)
	}
	when := time.Unix(secs, 0).UTC()
	if got := when.Format("20060102150405"); got != m[1] {
		t.Fatalf("pins %s, but commit %s was made at %s UTC: the pseudo-version is v0.0.0-%s-%s", version, full[:12], got, got, full[:12])
	}
	if strings.HasPrefix(version, "v0.0.0-") {
		if tag, err := git(t, "describe", "--tags", "--abbrev=0", "--match", "v[0-9]*", full); err == nil {
			t.Fatalf("pins %s, but tag %s precedes its commit: the go command derives the pseudo-version from that tag", version, tag)
		}
	}
	return pinnedCommit{Version: version, Commit: full, Time: when}
}

// docPins lists every parley version a tracked text file pins.
func docPins(t *testing.T) map[string][]string {
	t.Helper()
	files, err := git(t, "ls-files", "*.md", "*.yml", "*.yaml", "*.sh", "*.toml", "*.txt")
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	pins := map[string][]string{}
	for _, f := range strings.Fields(files) {
		b, err := os.ReadFile(filepath.Join("../..", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range pinRef.FindAllSubmatch(b, -1) {
			pins[string(m[1])] = append(pins[string(m[1])], f)
		}
	}
	return pins
}

// TestNoDocPinsAVersionTheRepositoryLacks: an adopter copies the version
// the docs pin; it must resolve from this repository's history.
func TestNoDocPinsAVersionTheRepositoryLacks(t *testing.T) {
	t.Parallel()
	pins := docPins(t)
	if len(pins) == 0 {
		t.Fatal("no doc pins a parley version; docs/certify.md and the workflow should")
	}
	for v, files := range pins {
		t.Run(v, func(t *testing.T) {
			t.Logf("pinned by %s", strings.Join(files, ", "))
			resolvePin(t, v)
		})
	}
}

func TestPinsAreCheckedAgainstTheHistory(t *testing.T) {
	t.Parallel()
	if !pseudoVersion.MatchString("v0.0.0-20261201174216-610c020385c1") || pseudoVersion.MatchString("v0.2.0") {
		t.Fatal("pseudo-version pattern")
	}
	got := pinRef.FindAllStringSubmatch("go run "+modulePath+"/cmd/parley@v0.2.0 run; go install "+modulePath+"@v1.0.0-rc.1`", -1)
	if len(got) != 2 || got[0][1] != "v0.2.0" || got[1][1] != "v1.0.0-rc.1" {
		t.Fatalf("pins found: %v", got)
	}
}

// installPin builds the pinned parley the way `go run module/cmd/parley@pin`
// does in the workflow: the go command resolves the version through a module
// proxy and builds it outside any module. The proxy here is a directory
// made from this repository's history (the module zip of the pinned commit,
// as `git archive` gives it), followed by the local module cache for the
// dependencies, and nothing else: no network.
func installPin(t *testing.T, pin pinnedCommit) string {
	t.Helper()
	proxy := t.TempDir()
	dir := filepath.Join(proxy, modulePath, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	info, _ := json.Marshal(map[string]any{"Version": pin.Version, "Time": pin.Time})
	if err := os.WriteFile(filepath.Join(dir, pin.Version+".info"), info, 0o644); err != nil {
		t.Fatal(err)
	}
	// The list lets the go command look up the latest version, for the
	// module's deprecation notice.
	if err := os.WriteFile(filepath.Join(dir, "list"), []byte(pin.Version+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mod, err := exec.Command("git", "-C", "../..", "show", pin.Commit+":go.mod").Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, pin.Version+".mod"), mod, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", "../..", "archive", "--format=zip", "--prefix="+modulePath+"@"+pin.Version+"/",
		"-o", filepath.Join(dir, pin.Version+".zip"), pin.Commit).CombinedOutput(); err != nil {
		t.Fatalf("git archive: %v\n%s", err, out)
	}
	modcache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	cmd := exec.Command("go", "install", modulePath+"/cmd/parley@"+pin.Version)
	cmd.Dir = t.TempDir() // outside this module, as in the adopter's checkout
	cmd.Env = append(os.Environ(), "GOBIN="+bin, "GOFLAGS=", "GOTOOLCHAIN=local", "GOSUMDB=off", "GOWORK=off",
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(filepath.Join(strings.TrimSpace(string(modcache)), "cache", "download"))+",off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install %s@%s through a proxy made of this repository: %v\n%s", modulePath+"/cmd/parley", pin.Version, err, out)
	}
	return filepath.Join(bin, "parley")
}
