// Command walhost is a small ContractRefine host for one proof: that the
// suite notices a host which answers a preflight decision before the
// decision's WAL frame has reached the file. It is a real, separate process
// with a real WAL file in the state directory the suite gives it, and it
// meets the exec adapter contract (docs/host-interface.md).
//
//	walhost -wal fsync    CONFIG.json   writes and fsyncs each frame before it answers
//	walhost -wal buffered CONFIG.json   keeps frames in a user-space buffer that is
//	                                    written out only when it fills or at a clean stop
//	walhost -wal nosync   CONFIG.json   writes each frame to the file before it answers
//	                                    and never fsyncs it: the kernel holds it
//
// With -wal buffered the host is correct in every way the suite can see
// while it runs, and after a clean stop (SIGTERM flushes the buffer); killed
// with SIGKILL it loses every decision still in the buffer. It implements
// only what the WAL durability scenarios touch: POST and GET /v1/preflight
// and the WAL read-back seam, with a verifier that classifies the suite's
// reference requests.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
)

type config struct {
	Seams    bool   `json:"seams"`
	StateDir string `json:"state_dir"`
	CR       *struct {
		Mode              string `json:"mode"`
		MaxRepairAttempts *int   `json:"max_repair_attempts"`
	} `json:"contractrefine"`
}

type frame struct {
	Seq   int            `json:"seq"`
	Kind  string         `json:"kind"`
	Attrs map[string]any `json:"attrs"`
}

// wal is an append-only JSON-lines file. Frames are also kept in memory,
// which is what the host answers from.
type wal struct {
	mu       sync.Mutex
	f        *os.File
	w        *bufio.Writer // nil: write through (and fsync unless nosync)
	nosync   bool          // write through, never fsync
	frames   [][]byte
	byID     map[string]int
	repaired map[string]int // repair_required answers per session and plan hash
}

func openWAL(dir, mode string) (*wal, error) {
	path := filepath.Join(dir, "wal.jsonl")
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	w := &wal{byID: map[string]int{}, repaired: map[string]int{}}
	good := 0
	for len(b) > good {
		i := bytes.IndexByte(b[good:], '\n')
		if i < 0 {
			break // a torn final line: cut below
		}
		line := b[good : good+i]
		var fr frame
		if json.Unmarshal(line, &fr) != nil {
			break
		}
		w.remember(line, fr)
		good += i + 1
	}
	if w.f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		return nil, err
	}
	if err := w.f.Truncate(int64(good)); err != nil {
		return nil, err
	}
	if _, err := w.f.Seek(int64(good), io.SeekStart); err != nil {
		return nil, err
	}
	switch mode {
	case "buffered":
		w.w = bufio.NewWriterSize(w.f, 1<<20)
	case "nosync":
		w.nosync = true
	}
	return w, nil
}

func (w *wal) remember(line []byte, fr frame) {
	w.frames = append(w.frames, append([]byte(nil), line...))
	if fr.Kind != "autonomy.preflight" {
		return
	}
	if id, _ := fr.Attrs["preflight_id"].(string); id != "" {
		w.byID[id] = len(w.frames) - 1
	}
	if fr.Attrs["outcome"] == "repair_required" {
		w.repaired[fmt.Sprint(fr.Attrs["session_id"], "\x00", fr.Attrs["plan_hash"])]++
	}
}

func (w *wal) append(kind string, attrs map[string]any) error {
	fr := frame{Seq: len(w.frames) + 1, Kind: kind, Attrs: attrs}
	line, err := json.Marshal(fr)
	if err != nil {
		return err
	}
	if w.w != nil {
		// The defect under proof: the frame sits in this process's memory
		// when the decision is answered.
		if _, err := w.w.Write(append(line, '\n')); err != nil {
			return err
		}
	} else {
		if _, err := w.f.Write(append(line, '\n')); err != nil {
			return err
		}
		// The defect under proof with -wal nosync: the frame is out of the
		// process, in the kernel's page cache, and not on the disk.
		if !w.nosync {
			if err := w.f.Sync(); err != nil {
				return err
			}
		}
	}
	w.remember(line, fr)
	return nil
}

func (w *wal) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.w != nil {
		if err := w.w.Flush(); err != nil {
			return err
		}
	}
	if !w.nosync {
		if err := w.f.Sync(); err != nil {
			return err
		}
	}
	return w.f.Close()
}

type host struct {
	mode      string
	maxRepair int
	wal       *wal
}

type request struct {
	Intent struct {
		PlanHash string `json:"plan_hash"`
	} `json:"intent"`
	Actor struct {
		SessionID string `json:"session_id"`
		NodeID    string `json:"node_id"`
		AgentID   string `json:"agent_id"`
	} `json:"actor"`
	Capability string `json:"capability"`
	Plan       []struct {
		Kind       string                     `json:"kind"`
		Params     map[string]json.RawMessage `json:"params"`
		Provenance map[string]struct {
			Source string `json:"source"`
		} `json:"provenance"`
	} `json:"plan"`
	Context struct {
		Zone        string `json:"zone"`
		Environment string `json:"environment"`
	} `json:"context"`
}

func answer(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func fail(w http.ResponseWriter, status int, msg string) {
	answer(w, status, map[string]string{"error": msg})
}

func (h *host) preflight(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		fail(w, http.StatusMethodNotAllowed, "POST")
		return
	}
	if h.mode == "disabled" {
		fail(w, http.StatusServiceUnavailable, "disabled")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var req request
	if err != nil || json.Unmarshal(body, &req) != nil {
		fail(w, http.StatusBadRequest, "malformed body")
		return
	}
	outcome, reason := "pass", "contract: passed"
	var hints []map[string]string
	switch {
	case req.Actor.SessionID == "" || req.Intent.PlanHash == "":
		outcome, reason = "deny", "contract: session_metadata_missing"
	default:
		for i, s := range req.Plan {
			if s.Kind != req.Capability {
				outcome, reason = "deny", "contract: capability_mismatch"
			}
			for k := range s.Params {
				if s.Provenance[k].Source == "" {
					hints = append(hints, map[string]string{"path": fmt.Sprintf("plan[%d].provenance.%s.source", i, k), "op": "set", "value": "operator"})
				}
			}
		}
		if outcome == "pass" && len(hints) > 0 {
			outcome, reason = "repair_required", "contract: provenance_missing"
		}
	}
	h.wal.mu.Lock()
	defer h.wal.mu.Unlock()
	ladder := req.Actor.SessionID + "\x00" + req.Intent.PlanHash
	if outcome == "repair_required" && h.wal.repaired[ladder] >= h.maxRepair {
		outcome, reason, hints = "deny", "contract: repair_budget_exhausted", nil
	}
	if outcome != "repair_required" {
		hints = nil
	}
	eligibility := map[string]any{"allowed": false, "bound_tool_kinds": []string{}, "expires_at": ""}
	if outcome == "pass" {
		eligibility = map[string]any{"allowed": true, "bound_tool_kinds": []string{req.Capability}, "expires_at": time.Now().Add(5 * time.Minute).UTC().Format(time.RFC3339)}
	}
	results := []map[string]string{{"contract": "plan", "outcome": map[bool]string{true: "pass", false: "fail"}[outcome == "pass"], "severity": "blocking"}}
	decision := map[string]any{
		"preflight_id": uuid.NewString(), "audit_id": uuid.NewString(),
		"outcome": outcome, "reason": reason,
		"policy_ref": "walhost-policy/1", "lock_fingerprint": "blake3:0a11",
		"contract_results": results, "execution_eligibility": eligibility,
	}
	if hints != nil {
		decision["repair_hints"] = hints
	}
	dj, _ := json.Marshal(decision)
	rj, _ := json.Marshal(results)
	attrs := map[string]any{
		"preflight_id": decision["preflight_id"], "audit_id": decision["audit_id"],
		"outcome": outcome, "reason": reason, "policy_ref": decision["policy_ref"],
		"lock_fingerprint": decision["lock_fingerprint"], "plan_hash": req.Intent.PlanHash,
		"capability": req.Capability, "contract_results": string(rj),
		"repair_hints_count": len(hints), "expires_at": eligibility["expires_at"],
		"decision_json": string(dj), "session_id": req.Actor.SessionID,
	}
	for k, v := range map[string]string{"zone": req.Context.Zone, "environment": req.Context.Environment, "actor_node_id": req.Actor.NodeID, "actor_agent_id": req.Actor.AgentID} {
		if v != "" {
			attrs[k] = v
		}
	}
	if err := h.wal.append("autonomy.preflight", attrs); err != nil {
		fail(w, http.StatusInternalServerError, "WAL emit failed")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(dj)
}

func (h *host) stored(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		fail(w, http.StatusMethodNotAllowed, "GET")
		return
	}
	if h.mode == "disabled" {
		fail(w, http.StatusServiceUnavailable, "disabled")
		return
	}
	id := strings.TrimPrefix(r.URL.Path, "/v1/preflight/")
	if id == "" {
		fail(w, http.StatusBadRequest, "empty preflight_id")
		return
	}
	h.wal.mu.Lock()
	i, ok := h.wal.byID[id]
	var line []byte
	if ok {
		line = h.wal.frames[i]
	}
	h.wal.mu.Unlock()
	if !ok {
		fail(w, http.StatusNotFound, "no autonomy.preflight frame")
		return
	}
	var fr frame
	_ = json.Unmarshal(line, &fr)
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, fmt.Sprint(fr.Attrs["decision_json"]))
}

func (h *host) seam(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	h.wal.mu.Lock()
	lines := append([][]byte(nil), h.wal.frames...)
	h.wal.mu.Unlock()
	out := []json.RawMessage{}
	for _, line := range lines {
		var fr frame
		_ = json.Unmarshal(line, &fr)
		keep := q.Get("kind") == "" || q.Get("kind") == fr.Kind
		for k := range q {
			if name, ok := strings.CutPrefix(k, "attr."); ok && fmt.Sprint(fr.Attrs[name]) != q.Get(k) {
				keep = false
			}
		}
		if keep {
			out = append(out, line)
		}
	}
	answer(w, http.StatusOK, map[string]any{"frames": out})
}

func main() {
	walMode := flag.String("wal", "fsync", "fsync: each frame is durable before the answer; buffered: frames wait in a user-space buffer; nosync: frames are written and never fsync'd")
	flag.Parse()
	log.SetFlags(0)
	b, err := os.ReadFile(flag.Arg(0))
	if err != nil {
		log.Fatal(err)
	}
	var cfg config
	if err := json.Unmarshal(b, &cfg); err != nil || cfg.CR == nil {
		fmt.Println(`{"parley":"declined","reason":"walhost runs only a contractrefine section"}`)
		return
	}
	h := &host{mode: cfg.CR.Mode, maxRepair: 2}
	if h.mode == "" {
		h.mode = "advisory"
	}
	if cfg.CR.MaxRepairAttempts != nil {
		h.maxRepair = *cfg.CR.MaxRepairAttempts
	}
	dir := cfg.StateDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "walhost-*"); err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(dir)
	}
	if h.wal, err = openWAL(dir, *walMode); err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/preflight", h.preflight)
	mux.HandleFunc("/v1/preflight/", h.stored)
	if cfg.Seams {
		mux.HandleFunc("/conformance/seams/contractrefine/wal", h.seam)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	// Listen for a clean stop before saying ready: a SIGTERM that came
	// earlier would kill the process with the buffer unwritten.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf(`{"parley":"ready","http":"http://%s"}`+"\n", ln.Addr())
	<-sig
	_ = srv.Close()
	if err := h.wal.close(); err != nil {
		log.Fatal(err)
	}
}
