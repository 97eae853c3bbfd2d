package agl

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-conformance/parley/internal/scratch"
	"github.com/parley-conformance/parley/internal/testpar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/parley-conformance/parley/peers/fakemail"
	"github.com/parley-conformance/parley/refhost/hostenv"
)

// The two-process tests re-execute this test binary as a host: with
// AGL_TEST_HOST_CONFIG set, TestMain runs a host instead of the tests.
const (
	envHostConfig = "AGL_TEST_HOST_CONFIG"
	envHostDir    = "AGL_TEST_HOST_DIR"
	envTrials     = "AGL_CONTENTION_TRIALS"
)

var trialsFlag = flag.Int("agl.trials", 0, "contended trials for the two-process test (overrides "+envTrials+"; default 1000, 50 with -short)")

func TestMain(m *testing.M) {
	if cfg := os.Getenv(envHostConfig); cfg != "" {
		os.Exit(runHostProcess(cfg, os.Getenv(envHostDir)))
	}
	flag.Parse()
	// Scratch on tmpfs where there is one (internal/scratch); the host
	// processes the tests start inherit it.
	testpar.Main(m, 0, scratch.OnTmpfs())
}

func runHostProcess(cfgJSON, dir string) int {
	var cfg Config
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	h, err := Open(cfg, hostenv.Env{DataDir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	mux := http.NewServeMux()
	mux.Handle(PathPrefix, h.Handler())
	mux.Handle(SeamPrefix, h.Seams())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	fmt.Printf("AGL_LISTEN %s\n", ln.Addr())
	// The parent holds our stdin; when it closes it (or dies) we stop.
	io.Copy(io.Discard, os.Stdin)
	srv.Close()
	h.Close()
	return 0
}

type hostProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	c     *client
	done  chan struct{} // closed when the process has exited
	err   error
}

func startHostProc(t *testing.T, cfg Config) *hostProc {
	t.Helper()
	raw, err := json.Marshal(cfg)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHostConfig+"="+string(raw), envHostDir+"="+t.TempDir())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &hostProc{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "host process did not announce its address")
	addr := strings.TrimSpace(strings.TrimPrefix(line, "AGL_LISTEN "))
	go func() { io.Copy(io.Discard, stdout); p.err = cmd.Wait(); close(p.done) }()
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	p.c = &client{t: t, base: "http://" + addr, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
	t.Cleanup(func() { p.stop(t) })
	return p
}

func (p *hostProc) stop(t *testing.T) {
	p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill() // only the process this test started
		<-p.done
	}
}

func contentionTrials() int {
	if *trialsFlag > 0 {
		return *trialsFlag
	}
	if n, err := strconv.Atoi(os.Getenv(envTrials)); err == nil && n > 0 {
		return n
	}
	if testing.Short() {
		return 50
	}
	// The acceptance bar: exactly one effect per permit over 1,000
	// contended trials (about 10 ms a trial).
	return 1000
}

// TestTwoProcessSinglePermitClaim: two host processes share one SQLite file;
// every trial fires the same permit at both (two requests each) at once. The
// fake destination, which does not deduplicate, must see exactly one effect
// per permit.
func TestTwoProcessSinglePermitClaim(t *testing.T) {
	trials := contentionTrials()
	fake := fakemail.New(false)
	fs := httptest.NewServer(fake)
	defer fs.Close()
	cfg := Config{
		DatabasePath: filepath.Join(t.TempDir(), "shared.db"),
		Email:        Destination{URL: fs.URL, Account: "acme"},
		Keys:         testKeys,
	}
	a, b := startHostProc(t, cfg), startHostProc(t, cfg)
	ia := a.c.do("GET", "/agl/v1/", "", nil).str("instance")
	ib := b.c.do("GET", "/agl/v1/", "", nil).str("instance")
	require.NotEqual(t, ia, ib, "two distinct host processes")
	require.Equal(t, 201, a.c.do("POST", "/agl/v1/contracts", testKeys.Operator, emailContract(a.c, sendOp)).Status)
	s := newScenario(t, a.c, []string{sendOp})

	start := time.Now()
	wins, refusedAtStep := map[string]int{}, map[string]int{}
	for i := 0; i < trials; i++ {
		setup := s
		if i%2 == 1 {
			// Alternate which process prepares the permit.
			setup = &scenario{c: b.c, principal: s.principal, agent: s.agent, exec: s.exec, grantID: s.grantID, grantToken: s.grantToken, mailbox: s.mailbox}
		}
		_, handle := setup.draft(t)
		_, permit, _ := setup.approve(t, sendOp, map[string]any{"draft": handle}, "operator")

		body := s.action(sendOp, map[string]any{"draft": handle})
		body["permit_token"] = permit
		var wg sync.WaitGroup
		gate := make(chan struct{})
		results := make([]resp, 4)
		for j := range results {
			c := a.c
			if j%2 == 1 {
				c = b.c
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				results[j] = c.do("POST", "/agl/v1/dispatch", "", body)
			}()
		}
		close(gate)
		wg.Wait()
		okN, opID := 0, ""
		for j, r := range results {
			switch r.Status {
			case 200:
				okN++
				opID = r.str("operation_id")
				require.Equal(t, "Completed", r.str("state"))
				wins[[]string{"a", "b"}[j%2]]++
			case 409:
				require.Equal(t, "permit_consumed", r.code(), string(r.Raw))
				refusedAtStep[fmt.Sprint(r.Body["error"].(map[string]any)["step"])]++
			default:
				t.Fatalf("trial %d: unexpected %d %s", i, r.Status, r.Raw)
			}
		}
		require.Equal(t, 1, okN, "trial %d: exactly one dispatch succeeds", i)
		require.Equal(t, 1, fake.CountFor(opID), "trial %d: exactly one effect for the permit", i)
	}
	elapsed := time.Since(start)
	require.Equal(t, trials, fake.Count(), "one effect per permit overall")
	t.Logf("two-process contention: %d trials, %d effects, wins a=%d b=%d, losers refused by step %v, %s (%.1f ms/trial)",
		trials, fake.Count(), wins["a"], wins["b"], refusedAtStep, elapsed.Round(time.Millisecond), float64(elapsed.Milliseconds())/float64(trials))
}

// TestCrashWhileClaimedBecomesUnknown kills a host process at the
// external-call and completion boundaries and checks that another process on
// the same database reports Unknown, never retries, and reconciles by
// receiver lookup.
func TestCrashWhileClaimedBecomesUnknown(t *testing.T) {
	fake := fakemail.New(false)
	fs := httptest.NewServer(fake)
	defer fs.Close()
	cfg := Config{
		DatabasePath: filepath.Join(t.TempDir(), "crash.db"),
		Email:        Destination{URL: fs.URL, Account: "acme"},
		Keys:         testKeys,
		ClaimLeaseMS: 300,
	}
	survivor := startHostProc(t, cfg)
	c := survivor.c
	require.Equal(t, 201, c.do("POST", "/agl/v1/contracts", testKeys.Operator, emailContract(c, sendOp)).Status)

	for _, tc := range []struct {
		boundary   string
		effects    int
		reconciled string
		resource   string
	}{
		{"external_call", 0, "ReconciledNoEffect", "FailedNoEffect"},
		{"completion", 1, "ReconciledCompleted", "Sent"},
	} {
		t.Run(tc.boundary, func(t *testing.T) {
			before := fake.Count()
			victim := startHostProc(t, cfg)
			s := newScenario(t, c, []string{sendOp})
			resID, handle := s.draft(t)
			_, permit, _ := s.approve(t, sendOp, map[string]any{"draft": handle}, "operator")
			r := victim.c.do("POST", SeamPrefix+"faults", "", map[string]any{"boundary": tc.boundary, "action": "exit"})
			require.Equal(t, 201, r.Status, string(r.Raw))
			body := s.action(sendOp, map[string]any{"draft": handle})
			body["permit_token"] = permit
			raw, _ := json.Marshal(body)
			_, err := victim.c.hc.Post(victim.c.base+"/agl/v1/dispatch", "application/json", strings.NewReader(string(raw)))
			require.Error(t, err, "the host process exits mid-dispatch")
			select {
			case <-victim.done:
			case <-time.After(10 * time.Second):
				t.Fatal("victim did not exit")
			}
			assert.Equal(t, tc.effects, fake.Count()-before)

			// The survivor declares the orphaned claim Unknown once the
			// victim's lease lapses, and does not retry it.
			var op resp
			require.Eventually(t, func() bool {
				ops := c.do("GET", "/agl/v1/operations?execution_id="+s.exec, "", nil)
				list, _ := ops.Body["operations"].([]any)
				if len(list) != 1 {
					return false
				}
				m := list[0].(map[string]any)
				op = resp{Body: m}
				return m["state"] == "Unknown"
			}, 10*time.Second, 50*time.Millisecond)
			assert.Equal(t, "Unknown", c.do("GET", "/agl/v1/resources/"+resID, "", nil).str("state"))
			r = s.dispatch(sendOp, map[string]any{"draft": handle}, permit)
			assert.Equal(t, "uncertain_completion", r.code())
			assert.Equal(t, tc.effects, fake.Count()-before, "no silent retry")
			r = c.do("POST", "/agl/v1/operations/"+op.str("operation_id")+"/reconcile", testKeys.Operator, map[string]any{"method": "receiver_lookup"})
			require.Equal(t, 200, r.Status, string(r.Raw))
			assert.Equal(t, tc.reconciled, r.str("state"))
			assert.Equal(t, tc.resource, c.do("GET", "/agl/v1/resources/"+resID, "", nil).str("state"))
		})
	}
}
