package agtp

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/parley-conformance/parley/refhost/sqlitetpl"
	_ "modernc.org/sqlite" // driver "sqlite"
)

// Contract states. Evicted contracts (stale sweep) are deleted outright, so
// they answer 404; the tombstone states answer 464 contract-revoked.
const (
	statePending  = "pending" // confirm-first preview issued, not yet accepted
	stateActive   = "active"
	stateReleased = "released" // SUSPEND by the originator
	stateRevoked  = "revoked"  // REVOKE target=contract
	stateExpired  = "expired"  // TTL
)

const schema = `
CREATE TABLE IF NOT EXISTS contracts (
	synthesis_id   TEXT PRIMARY KEY,
	agent_id       TEXT NOT NULL,
	method         TEXT NOT NULL,
	path           TEXT NOT NULL,
	state          TEXT NOT NULL,
	origin         TEXT NOT NULL,
	recipe_name    TEXT,
	recipe_version TEXT,
	endpoint       TEXT NOT NULL,
	steps          TEXT NOT NULL,
	scopes         TEXT NOT NULL,
	contract_hash  TEXT NOT NULL,
	success_status INTEGER NOT NULL,
	created_at     INTEGER NOT NULL,
	expires_at     INTEGER NOT NULL,
	released_at    INTEGER,
	release_reason TEXT,
	session_key    TEXT,
	persistent     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS contracts_agent_pair ON contracts(agent_id, method, path, state);
CREATE TABLE IF NOT EXISTS lifecycle_events (
	seq      INTEGER PRIMARY KEY AUTOINCREMENT,
	agent_id TEXT NOT NULL,
	type     TEXT NOT NULL,
	payload  TEXT NOT NULL,
	at       INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS lifecycle_agent ON lifecycle_events(agent_id, seq);
CREATE TABLE IF NOT EXISTS rcns_attempts (
	attempt_id TEXT PRIMARY KEY,
	agent_id   TEXT NOT NULL,
	method     TEXT NOT NULL,
	path       TEXT NOT NULL,
	status     INTEGER NOT NULL,
	reason     TEXT NOT NULL,
	synthesis_id TEXT,
	at         INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS proposals (
	proposal_id  TEXT PRIMARY KEY,
	agent_id     TEXT NOT NULL,
	session_key  TEXT,
	method       TEXT NOT NULL,
	path         TEXT NOT NULL,
	proposal     TEXT NOT NULL,
	authority    TEXT NOT NULL,
	state        TEXT NOT NULL,
	status       INTEGER NOT NULL,
	response     TEXT,
	decided_by   TEXT,
	created_at   INTEGER NOT NULL,
	decided_at   INTEGER
);
CREATE INDEX IF NOT EXISTS proposals_state ON proposals(state, created_at);
CREATE TABLE IF NOT EXISTS idempotency (
	agent_id    TEXT NOT NULL,
	key         TEXT NOT NULL,
	fingerprint TEXT NOT NULL,
	status      INTEGER NOT NULL,
	headers     TEXT NOT NULL,
	body        BLOB,
	at          INTEGER NOT NULL,
	PRIMARY KEY (agent_id, key)
);
CREATE TABLE IF NOT EXISTS records (
	collection TEXT NOT NULL,
	key        TEXT NOT NULL,
	value      TEXT NOT NULL,
	PRIMARY KEY (collection, key)
);
CREATE TABLE IF NOT EXISTS counters (
	name  TEXT PRIMARY KEY,
	value INTEGER NOT NULL
);
`

func openDB(dir string) (*sql.DB, error) {
	if dir == "" {
		return nil, errors.New("agtp: hostenv.DataDir is required (contracts are durable)")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "agtp.db")
	// A new store begins as a copy of an empty one the process built once.
	err := sqlitetpl.Seed("agtp", path, func(p string) error {
		db, err := initDB(p)
		if err != nil {
			return err
		}
		return db.Close()
	})
	if err != nil {
		return nil, fmt.Errorf("agtp: create store %s: %w", path, err)
	}
	return initDB(path)
}

func initDB(path string) (*sql.DB, error) {
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	// One connection: SQLite serialises writers anyway, and a single
	// connection makes every transaction below strictly serial.
	db.SetMaxOpenConns(1)
	var version int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil {
		db.Close()
		return nil, fmt.Errorf("agtp: read schema version: %w", err)
	}
	if version >= schemaVersion {
		return db, nil
	}
	// The schema in one transaction: one commit (one fsync at
	// synchronous=FULL) instead of one per statement.
	if err := execInTx(db, schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("agtp: schema: %w", err)
	}
	if err := migrate(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("agtp: schema migration: %w", err)
	}
	if _, err := db.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion)); err != nil {
		db.Close()
		return nil, fmt.Errorf("agtp: record schema version: %w", err)
	}
	return db, nil
}

// schemaVersion is the store's PRAGMA user_version once schema and migrate
// have run on it. A store already there opens without running them, so
// that opening it parses no DDL (most of a new host's start-up otherwise).
// Bump it whenever schema or migrate changes.
const schemaVersion = 1

func execInTx(db *sql.DB, stmts string) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	if _, err := tx.Exec(stmts); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// migrate adds the columns later versions introduced to a store an earlier
// version created.
func migrate(db *sql.DB) error {
	have := map[string]bool{}
	rows, err := db.Query(`SELECT name FROM pragma_table_info('contracts')`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return err
		}
		have[n] = true
	}
	rows.Close()
	for _, col := range []struct{ name, def string }{
		{"session_key", "TEXT"},
		{"persistent", "INTEGER NOT NULL DEFAULT 0"},
	} {
		if !have[col.name] {
			if _, err := db.Exec(`ALTER TABLE contracts ADD COLUMN ` + col.name + ` ` + col.def); err != nil {
				return err
			}
		}
	}
	// Every connection close looks up its session's syntheses.
	_, err = db.Exec(`CREATE INDEX IF NOT EXISTS contracts_session ON contracts(session_key) WHERE session_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS proposals_session ON proposals(session_key, state) WHERE session_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS contracts_persistent ON contracts(method) WHERE persistent = 1`)
	return err
}

type contract struct {
	ID            string
	AgentID       string
	Method, Path  string
	State         string
	Origin        string
	RecipeName    sql.NullString
	RecipeVersion sql.NullString
	Endpoint      json.RawMessage
	Steps         []string
	Scopes        []string
	Hash          string
	SuccessStatus int
	CreatedAt     time.Time
	ExpiresAt     time.Time
	ReleasedAt    sql.NullInt64
	ReleaseReason sql.NullString
	// SessionKey binds a session-scoped (PROPOSE) synthesis to the AGTP
	// session that proposed it; it is released when that session ends.
	SessionKey sql.NullString
	// Persistent marks a synthesis the server took into its regular
	// endpoint catalog (PROPOSE persistent: true, honoured).
	Persistent bool
}

const contractCols = `synthesis_id, agent_id, method, path, state, origin, recipe_name, recipe_version, endpoint, steps, scopes, contract_hash, success_status, created_at, expires_at, released_at, release_reason, session_key, persistent`

type querier interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

type scanner interface{ Scan(...any) error }

func scanContract(s scanner) (*contract, error) {
	var c contract
	var ep, steps, scopes string
	var created, expires int64
	if err := s.Scan(&c.ID, &c.AgentID, &c.Method, &c.Path, &c.State, &c.Origin, &c.RecipeName, &c.RecipeVersion,
		&ep, &steps, &scopes, &c.Hash, &c.SuccessStatus, &created, &expires, &c.ReleasedAt, &c.ReleaseReason, &c.SessionKey, &c.Persistent); err != nil {
		return nil, err
	}
	c.Endpoint = json.RawMessage(ep)
	if err := json.Unmarshal([]byte(steps), &c.Steps); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(scopes), &c.Scopes); err != nil {
		return nil, err
	}
	c.CreatedAt, c.ExpiresAt = time.Unix(0, created).UTC(), time.Unix(0, expires).UTC()
	return &c, nil
}

func getContract(ctx context.Context, q querier, id string) (*contract, error) {
	c, err := scanContract(q.QueryRowContext(ctx, `SELECT `+contractCols+` FROM contracts WHERE synthesis_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return c, err
}

func insertContract(ctx context.Context, q querier, c *contract) error {
	steps, _ := json.Marshal(c.Steps)
	scopes, _ := json.Marshal(c.Scopes)
	_, err := q.ExecContext(ctx, `INSERT INTO contracts (`+contractCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		c.ID, c.AgentID, c.Method, c.Path, c.State, c.Origin, c.RecipeName, c.RecipeVersion, string(c.Endpoint),
		string(steps), string(scopes), c.Hash, c.SuccessStatus, c.CreatedAt.UnixNano(), c.ExpiresAt.UnixNano(), c.ReleasedAt, c.ReleaseReason, c.SessionKey, c.Persistent)
	return err
}

func listContracts(ctx context.Context, q querier, where string, args ...any) ([]*contract, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+contractCols+` FROM contracts `+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*contract
	for rows.Next() {
		c, err := scanContract(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// release moves a live contract to a tombstone state and records the
// rcns_release event in its originator's lifecycle stream, atomically.
func release(ctx context.Context, q querier, c *contract, state, reason string, now time.Time, extra map[string]any) error {
	res, err := q.ExecContext(ctx, `UPDATE contracts SET state = ?, released_at = ?, release_reason = ? WHERE synthesis_id = ? AND state IN ('pending','active')`,
		state, now.UnixNano(), reason, c.ID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil // someone else released it first; one event only
	}
	return emitRelease(ctx, q, c, reason, now, extra)
}

func emitRelease(ctx context.Context, q querier, c *contract, reason string, now time.Time, extra map[string]any) error {
	p := map[string]any{"synthesis_id": c.ID, "reason": reason, "method": c.Method, "path": c.Path}
	if c.RecipeName.Valid {
		p["recipe_lineage"] = map[string]any{"recipe_name": c.RecipeName.String, "recipe_version": c.RecipeVersion.String}
	}
	for k, v := range extra {
		p[k] = v
	}
	return addEvent(ctx, q, c.AgentID, "rcns_release", p, now)
}

func addEvent(ctx context.Context, q querier, agent, typ string, payload map[string]any, now time.Time) error {
	b, _ := json.Marshal(payload)
	_, err := q.ExecContext(ctx, `INSERT INTO lifecycle_events (agent_id, type, payload, at) VALUES (?,?,?,?)`, agent, typ, string(b), now.UnixNano())
	return err
}

// Event is one entry of an agent's lifecycle stream.
type Event struct {
	Seq     int64          `json:"seq"`
	AgentID string         `json:"agent_id"`
	Type    string         `json:"type"`
	Payload map[string]any `json:"payload"`
	At      string         `json:"at"`
}

func listEvents(ctx context.Context, q querier, agent, typ string, limit int) ([]Event, error) {
	where, args := "WHERE 1=1", []any{}
	if agent != "" {
		where += " AND agent_id = ?"
		args = append(args, agent)
	}
	if typ != "" {
		where += " AND type = ?"
		args = append(args, typ)
	}
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	rows, err := q.QueryContext(ctx, `SELECT seq, agent_id, type, payload, at FROM lifecycle_events `+where+` ORDER BY seq LIMIT `+fmt.Sprint(limit), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Event{}
	for rows.Next() {
		var e Event
		var p string
		var at int64
		if err := rows.Scan(&e.Seq, &e.AgentID, &e.Type, &p, &at); err != nil {
			return nil, err
		}
		_ = json.Unmarshal([]byte(p), &e.Payload)
		e.At = time.Unix(0, at).UTC().Format(time.RFC3339Nano)
		out = append(out, e)
	}
	return out, rows.Err()
}
