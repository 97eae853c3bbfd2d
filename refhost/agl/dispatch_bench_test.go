package agl

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-conformance/parley/internal/benchpair"
	"github.com/parley-conformance/parley/peers/fakemail"
	"github.com/parley-conformance/parley/refhost/hostenv"
)

// benchHost is a host behind an HTTP server with a fake email destination,
// without seams (as an operator runs it), plus a second store opened with
// the same DSN for a bare baseline to write to.
type benchHost struct {
	h     *Host
	srv   *httptest.Server
	mux   *http.ServeMux
	c     *client
	email *fakemail.Server
	bare  *store
	// bareDest is a second destination of the same type, so that the
	// bare handler's calls do not mix with the host's effects.
	bareDest string
}

func newBenchHost(b *testing.B) *benchHost {
	b.Helper()
	dir := b.TempDir()
	email, bareEmail := fakemail.New(false), fakemail.New(false)
	es, bs := httptest.NewServer(email), httptest.NewServer(bareEmail)
	b.Cleanup(es.Close)
	b.Cleanup(bs.Close)
	h, err := Open(Config{DatabasePath: filepath.Join(dir, "ops.db"), Email: Destination{URL: es.URL, Account: "acme"}, Keys: testKeys},
		hostenv.Env{DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	bare, err := openStore(filepath.Join(dir, "bare.db"), time.Duration(h.cfg.BusyTimeoutMS)*time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(PathPrefix, h.Handler())
	srv := httptest.NewServer(mux)
	b.Cleanup(func() { srv.Close(); h.Close(); bare.close() })
	bh := &benchHost{h: h, srv: srv, mux: mux, email: email, bare: bare, bareDest: bs.URL}
	bh.c = &client{t: b, base: srv.URL, hc: srv.Client()}
	r := bh.c.do("POST", "/agl/v1/contracts", testKeys.Operator, emailContract(bh.c, sendOp))
	if r.Status != 200 && r.Status != 201 {
		b.Fatalf("register: %d %s", r.Status, r.Raw)
	}
	return bh
}

// approved is an approved email action, ready to dispatch once.
type approved struct {
	body     []byte // the dispatch request
	permitID string
}

// approveMany drafts, proposes and approves n emails of one scenario.
func (bh *benchHost) approveMany(b *testing.B, n int) (*scenario, []approved) {
	b.Helper()
	s := newScenario(b, bh.c, []string{sendOp})
	out := make([]approved, n)
	for i := range out {
		_, handle := s.draft(b)
		_, permit, permitID := s.approve(b, sendOp, map[string]any{"draft": handle}, "operator")
		body := s.action(sendOp, map[string]any{"draft": handle})
		body["permit_token"] = permit
		raw, err := json.Marshal(body)
		if err != nil {
			b.Fatal(err)
		}
		out[i] = approved{body: raw, permitID: permitID}
	}
	return s, out
}

func (bh *benchHost) post(b *testing.B, path string, body []byte) []byte {
	resp, err := bh.srv.Client().Post(bh.srv.URL+path, "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("%s answered %d: %s", path, resp.StatusCode, raw)
	}
	return raw
}

// BenchmarkDispatch measures POST /agl/v1/dispatch of an approved email (the
// enforcing dispatcher's nine steps: contract and fingerprints, arguments
// and handles, tool set and grant chain, effect ceiling and resource state,
// the permit against the canonical snapshot, admission, the claim
// transaction, the call to the destination, the outcome transaction)
// against a bare handler on the same server doing the same I/O: it decodes
// the request, makes the same writes in the same two transactions on a
// store opened with the same DSN (WAL, synchronous=FULL, BEGIN IMMEDIATE):
// the permit consumed, the operation claimed, the resource moved, an audit
// record of the same size; then the same POST to a destination of the same
// type with a body of the same size; then the outcome, the resource state
// and a second audit record; and it answers with as many bytes as the host.
// What it leaves out are the reads and checks, which are the host's logic.
// Permits are approved before the timed loop, one per dispatch. The ratio
// is host/bare time; the goal is at most 2.
func BenchmarkDispatch(b *testing.B) {
	bh := newBenchHost(b)
	_, actions := bh.approveMany(b, b.N+1)

	// Learn the sizes from one dispatch.
	probe := actions[b.N]
	answer := bh.post(b, PathPrefix+"dispatch", probe.body)
	var op struct {
		ID string `json:"operation_id"`
	}
	if err := json.Unmarshal(answer, &op); err != nil || op.ID == "" {
		b.Fatalf("probe dispatch: %s", answer)
	}
	var claimedRec, outcomeRec, outcome string
	db := bh.h.st.db
	if err := db.QueryRow(`SELECT record FROM audit WHERE operation_id=? AND event='claimed'`, op.ID).Scan(&claimedRec); err != nil {
		b.Fatal(err)
	}
	if err := db.QueryRow(`SELECT record FROM audit WHERE operation_id=? AND event='outcome'`, op.ID).Scan(&outcomeRec); err != nil {
		b.Fatal(err)
	}
	if err := db.QueryRow(`SELECT outcome FROM operations WHERE id=?`, op.ID).Scan(&outcome); err != nil {
		b.Fatal(err)
	}
	sent := bh.email.Requests()
	destBody := sent[len(sent)-1].Body
	bareAnswer := bytes.Repeat([]byte("x"), len(answer)-1)

	// The bare side's rows: one permit, operation and resource per
	// dispatch, in the states the host's are in when a dispatch arrives.
	ids := seedBareClaims(b, bh.bare, b.N)
	destClient := &http.Client{}
	next := 0
	bh.mux.HandleFunc("POST /bare/dispatch", func(w http.ResponseWriter, r *http.Request) {
		var req map[string]any
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		id := ids[next]
		next++
		ctx := r.Context()
		err := bh.bare.tx(ctx, func(tx *sql.Tx) error {
			t := time.Now().UnixMilli()
			if _, err := tx.Exec(`UPDATE permits SET consumed_at=?, consumed_by=? WHERE id=? AND consumed_at IS NULL AND revoked_at IS NULL AND expires_at>?`, t, id, id, t); err != nil {
				return err
			}
			if _, err := tx.Exec(`UPDATE operations SET state='Claimed', permit_id=?, attempt=1, owner_instance=?, updated_at=? WHERE id=? AND state='Pending'`, id, "inst", t, id); err != nil {
				return err
			}
			if _, err := tx.Exec(`UPDATE resources SET state='Dispatching', last_operation=?, updated_at=? WHERE id=? AND revision=1 AND state='Authorized'`, id, t, id); err != nil {
				return err
			}
			_, err := tx.Exec(`INSERT INTO audit(at,event,record,operation_id,execution_id) VALUES(?,?,?,?,?)`, t, "claimed", claimedRec, id, "exec")
			return err
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		dreq, _ := http.NewRequestWithContext(ctx, http.MethodPost, bh.bareDest+"/send", bytes.NewReader(destBody))
		dreq.Header.Set("Content-Type", "application/json")
		dreq.Header.Set("Idempotency-Key", id)
		dreq.Header.Set("X-AGL-Operation-Id", id)
		dreq.Header.Set("X-AGL-Attempt", "1")
		dresp, err := destClient.Do(dreq)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		var receipt struct {
			MessageID string `json:"message_id"`
		}
		raw, _ := io.ReadAll(dresp.Body)
		dresp.Body.Close()
		if json.Unmarshal(raw, &receipt) != nil || receipt.MessageID == "" {
			http.Error(w, "no receipt", http.StatusBadGateway)
			return
		}
		err = bh.bare.tx(ctx, func(tx *sql.Tx) error {
			t := time.Now().UnixMilli()
			if _, err := tx.Exec(`UPDATE operations SET state='Completed', outcome=?, attempt=1, updated_at=? WHERE id=? AND state='Claimed'`, outcome, t, id); err != nil {
				return err
			}
			if _, err := tx.Exec(`UPDATE resources SET state='Sent', updated_at=? WHERE id=? AND state='Dispatching' AND last_operation=?`, t, id, id); err != nil {
				return err
			}
			_, err := tx.Exec(`INSERT INTO audit(at,event,record,operation_id,execution_id) VALUES(?,?,?,?,?)`, t, "outcome", outcomeRec, id, "exec")
			return err
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		w.Write(bareAnswer)
		w.Write([]byte("\n"))
	})

	i := 0
	benchpair.Run(b, "host/bare", func(b *testing.B) {
		bh.post(b, "/bare/dispatch", actions[i].body)
	}, func(b *testing.B) {
		raw := bh.post(b, PathPrefix+"dispatch", actions[i].body)
		i++
		if !strings.Contains(string(raw), `"state":"Completed"`) {
			b.Fatalf("dispatch: %s", raw)
		}
	})
	if got := bh.email.Count(); got != b.N+1 {
		b.Fatalf("the destination saw %d effects, want %d", got, b.N+1)
	}
}
