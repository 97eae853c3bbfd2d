package agtp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/internal/benchpair"
	"github.com/parley-conformance/parley/refhost/hostenv"
	wire "github.com/parley-conformance/parley/wire/agtp"
)

// benchAgents is how many agents the gate benchmark rotates through. Each
// request is an agent's first for its pair, so the gate runs every time;
// with enough agents each one holds only a few live contracts, and the
// resolver's look-up of the caller's own contracts stays the size it has
// for a real agent instead of growing with the iteration count.
const benchAgents = 512

func benchAgentID(i int) string { return fmt.Sprintf("%064x", i%benchAgents+1) }

func benchTOML() string {
	var b strings.Builder
	b.WriteString(`server_id = "refhost-bench"

[policies.rcns]
enabled = true
mode = "optimistic"
rate_limit_per_minute = 1000000

[[policies.recipes]]
name = "room-booking"
version = "1"
method = "BOOK"
path = "/room/{id}"
steps = ["rooms.put", "bookings.count"]
success_status = 201

[[primitives]]
name = "rooms.put"
kind = "record.put"
collection = "rooms"
scopes = ["rooms:write"]

[[primitives]]
name = "bookings.count"
kind = "counter.incr"
collection = "bookings"
scopes = ["rooms:write"]
`)
	for i := range benchAgents {
		fmt.Fprintf(&b, "\n[[agents]]\nagent_id = %q\ntrust_tier = 1\nscopes = [\"rooms:*\", \"rcns:negotiate\"]\n", benchAgentID(i))
	}
	return b.String()
}

// bareAGTP answers every request with a fixed response after the writes
// the gate makes, on the same kind of server.
type bareAGTP func(req *wire.Request) *wire.Response

func (f bareAGTP) ServeAGTP(_ context.Context, _ wire.ConnInfo, req *wire.Request) *wire.Response {
	return f(req)
}

// BenchmarkGate measures an AGTP/1.0 request through the four-lock gate to
// an action that succeeds (RCNS in optimistic mode: the caller's opt-in,
// its identity and authority, the trust tier, the rate limit, a contract
// synthesised from a recipe and stored, its two steps run in one
// transaction, the attempt recorded, an Attribution-Record signed) against
// a bare handler behind the same server type (wire/agtp's Server, same
// options, plaintext loopback, a kept connection from the same client)
// doing the same I/O: it reads the request frame and decodes its JSON body,
// makes the gate's three commits on a store opened by the same code with
// the same schema and pragmas (WAL, synchronous=FULL, one connection): the
// contract row, the two steps' upserts in one transaction, the attempt
// row, each of the host's size; and it answers with the host's own
// response, headers and body, byte for byte the same size. What it leaves
// out is the gate's logic. The ratio is host/bare time; the goal is at
// most 2.
func BenchmarkGate(b *testing.B) {
	dir := b.TempDir()
	cfg, err := ParseTOML([]byte(benchTOML()))
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	h, err := Open(cfg, hostenv.Env{DataDir: filepath.Join(dir, "host"), Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go h.ServeAGTP(hl)
	hc, err := wire.NewClient(hl.Addr().String(), wire.ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer hc.Close()

	request := func(i int) *wire.Request {
		body := fmt.Appendf(nil, `{"method":"BOOK","parameters":{"id":"%d"}}`, i)
		req, err := wire.NewRequest("BOOK", fmt.Sprintf("/room/%d", i), body)
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Agent-ID", benchAgentID(i))
		req.Header.Set("Allow-RCNS", "true")
		req.Header.Set("Content-Type", wire.MediaType)
		return req
	}
	do := func(b *testing.B, c *wire.Client, req *wire.Request) *wire.Response {
		resp, err := c.Do(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		if resp.Status != 201 {
			b.Fatalf("%s %s answered %d: %s", req.Method, req.Path, resp.Status, resp.Body)
		}
		return resp
	}

	// One request through the gate, to learn what it wrote and answered.
	// Its index is past every benchmark request's, so its pair is new.
	probeIdx := b.N + benchAgents
	answer := do(b, hc, request(probeIdx))
	sid := answer.Header.Get("Contract-Synthesized")
	if sid == "" || answer.Header.Get("RCNS-Attempt-Id") == "" {
		b.Fatalf("the probe did not go through the gate: %v", answer.Header)
	}
	k, err := getContract(context.Background(), h.db, sid)
	if err != nil || k == nil {
		b.Fatalf("the probe's contract: %v", err)
	}
	var attemptReason string
	if err := h.db.QueryRow(`SELECT reason FROM rcns_attempts WHERE attempt_id = ?`, answer.Header.Get("RCNS-Attempt-Id")).Scan(&attemptReason); err != nil {
		b.Fatal(err)
	}

	// The bare side's store: the same openDB, so the same schema, DSN and
	// single connection.
	bdb, err := openDB(filepath.Join(dir, "bare"))
	if err != nil {
		b.Fatal(err)
	}
	defer bdb.Close()
	n := 0
	bare := bareAGTP(func(req *wire.Request) *wire.Response {
		var env map[string]any
		if err := json.Unmarshal(req.Body, &env); err != nil {
			return wire.ErrorResponse(400, "malformed-body", err.Error())
		}
		params, _ := env["parameters"].(map[string]any)
		n++
		ctx := context.Background()
		c := *k
		c.ID = fmt.Sprintf("syn_%036d", n) // the length of a uuid
		c.AgentID, c.Path = req.Header.Get("Agent-ID"), req.Path
		if err := insertContract(ctx, bdb, &c); err != nil {
			return wire.ErrorResponse(500, "internal-error", err.Error())
		}
		tx, err := bdb.BeginTx(ctx, nil)
		if err != nil {
			return wire.ErrorResponse(500, "internal-error", err.Error())
		}
		defer tx.Rollback()
		for _, s := range c.Steps {
			if _, err := runPrimitive(ctx, tx, h.prims[s], params); err != nil {
				return wire.ErrorResponse(500, "internal-error", err.Error())
			}
		}
		if err := tx.Commit(); err != nil {
			return wire.ErrorResponse(500, "internal-error", err.Error())
		}
		if _, err := bdb.ExecContext(ctx, `INSERT INTO rcns_attempts (attempt_id, agent_id, method, path, status, reason, synthesis_id, at) VALUES (?,?,?,?,?,?,?,?)`,
			fmt.Sprintf("att_%036d", n), c.AgentID, req.Method, req.Path, 201, attemptReason, c.ID, c.CreatedAt.UnixNano()); err != nil {
			return wire.ErrorResponse(500, "internal-error", err.Error())
		}
		return &wire.Response{Status: answer.Status, Header: answer.Header, Body: answer.Body}
	})
	bs := wire.NewServer(bare, wire.ServerOptions{Logger: log, ServerID: cfg.ServerID, ConnClosed: func(wire.ConnInfo) {}})
	bl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go bs.Serve(bl)
	defer bs.Close()
	bc, err := wire.NewClient(bl.Addr().String(), wire.ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer bc.Close()

	i := 0
	benchpair.Run(b, "host/bare", func(b *testing.B) {
		do(b, bc, request(i))
	}, func(b *testing.B) {
		r := do(b, hc, request(i))
		i++
		if r.Header.Get("Contract-Synthesized") == "" || r.Header.Get("RCNS-Attempt-Id") == "" {
			b.Fatalf("not served through the gate: %v", r.Header)
		}
	})
}
