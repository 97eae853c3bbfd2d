package openwop

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"

	_ "modernc.org/sqlite" // pure-Go driver, so the host builds without cgo
)

// store is the host's durable state: host events and run logs in one SQLite
// file. Writes are serialised in Go so that a host event's sequence number
// and the wake-up of its subscribers happen in the same order.
type store struct {
	db *sql.DB
	mu sync.Mutex

	// wake is closed and replaced after every host-event append; a
	// subscriber that grabbed the old channel re-queries when it closes.
	wakeMu sync.Mutex
	wake   chan struct{}
}

const schemaSQL = `
CREATE TABLE IF NOT EXISTS host_events (
	seq          INTEGER PRIMARY KEY AUTOINCREMENT,
	event_id     TEXT NOT NULL UNIQUE,
	tenant_id    TEXT,            -- NULL: unauthenticated, delivered to nobody
	workspace_id TEXT,
	type         TEXT NOT NULL,
	envelope     BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS host_events_by_tenant ON host_events (tenant_id, seq);
CREATE TABLE IF NOT EXISTS runs (
	run_id     TEXT PRIMARY KEY,
	tenant_id  TEXT NOT NULL,
	created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS run_events (
	run_id TEXT NOT NULL REFERENCES runs (run_id),
	seq    INTEGER NOT NULL,
	event  BLOB NOT NULL,
	PRIMARY KEY (run_id, seq)
);
`

func openStore(dir string) (*store, error) {
	if dir == "" {
		return nil, errors.New("openwop: env.DataDir is required for durable host events")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	q := url.Values{}
	// FULL sync: an event the host acknowledged must survive a crash, since
	// it is the witness that no downgrade was silent.
	for _, p := range []string{"journal_mode(WAL)", "synchronous(FULL)", "busy_timeout(5000)", "foreign_keys(ON)"} {
		q.Add("_pragma", p)
	}
	dsn := "file:" + filepath.Join(dir, "openwop.db") + "?" + q.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	// One transaction: one commit (one fsync at synchronous=FULL) for the
	// whole schema instead of one per statement.
	tx, err := db.Begin()
	if err == nil {
		if _, err = tx.Exec(schemaSQL); err != nil {
			tx.Rollback()
		} else {
			err = tx.Commit()
		}
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("openwop: migrate: %w", err)
	}
	return &store{db: db, wake: make(chan struct{})}, nil
}

func (s *store) close() error { return s.db.Close() }

// waiter returns a channel that is closed after the next host-event append.
func (s *store) waiter() <-chan struct{} {
	s.wakeMu.Lock()
	defer s.wakeMu.Unlock()
	return s.wake
}

func (s *store) broadcast() {
	s.wakeMu.Lock()
	close(s.wake)
	s.wake = make(chan struct{})
	s.wakeMu.Unlock()
}

func nullable(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// appendHostEvent persists one envelope; tenant "" records it with no
// audience at all.
func (s *store) appendHostEvent(ctx context.Context, eventID, tenant, workspace, typ string, envelope []byte) error {
	s.mu.Lock()
	_, err := s.db.ExecContext(ctx,
		`INSERT INTO host_events (event_id, tenant_id, workspace_id, type, envelope) VALUES (?, ?, ?, ?, ?)`,
		eventID, nullable(tenant), nullable(workspace), typ, envelope)
	s.mu.Unlock()
	if err == nil {
		s.broadcast()
	}
	return err
}

type storedEvent struct {
	seq      int64
	eventID  string
	typ      string
	envelope []byte
}

// hostEventsAfter returns up to limit events of one tenant after seq. A NULL
// tenant never equals anything, which is what keeps unauthenticated records
// out of every stream.
func (s *store) hostEventsAfter(ctx context.Context, tenant string, after int64, limit int) ([]storedEvent, error) {
	rows, err := s.db.QueryContext(ctx,
		`SELECT seq, event_id, type, envelope FROM host_events WHERE tenant_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
		tenant, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []storedEvent
	for rows.Next() {
		var e storedEvent
		if err := rows.Scan(&e.seq, &e.eventID, &e.typ, &e.envelope); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// seqOf resolves a Last-Event-ID within one tenant; another tenant's id is
// as unknown as a made-up one, so ids leak nothing across tenants.
func (s *store) seqOf(ctx context.Context, tenant, eventID string) (int64, bool, error) {
	var seq int64
	err := s.db.QueryRowContext(ctx,
		`SELECT seq FROM host_events WHERE tenant_id = ? AND event_id = ?`, tenant, eventID).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return seq, err == nil, err
}

// unattributedCount reports how many records have no tenant. Nothing on the
// wire can show them (RFC 0242 B.4), so the host's own tests count them here.
func (s *store) unattributedCount(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM host_events WHERE tenant_id IS NULL`).Scan(&n)
	return n, err
}

func (s *store) createRun(ctx context.Context, runID, tenant, at string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.db.ExecContext(ctx, `INSERT INTO runs (run_id, tenant_id, created_at) VALUES (?, ?, ?)`, runID, tenant, at)
	return err
}

// appendRunEvent assigns the next sequence number of the run and stores the
// event built for it.
func (s *store) appendRunEvent(ctx context.Context, runID string, build func(seq int64) ([]byte, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var next int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) + 1 FROM run_events WHERE run_id = ?`, runID).Scan(&next); err != nil {
		return err
	}
	ev, err := build(next)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO run_events (run_id, seq, event) VALUES (?, ?, ?)`, runID, next, ev); err != nil {
		return err
	}
	return tx.Commit()
}

// runTenant returns the owner of a run, or "" when the run does not exist.
func (s *store) runTenant(ctx context.Context, runID string) (string, error) {
	var t string
	err := s.db.QueryRowContext(ctx, `SELECT tenant_id FROM runs WHERE run_id = ?`, runID).Scan(&t)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return t, err
}

func (s *store) runEventsAfter(ctx context.Context, runID string, after int64, limit int) ([][]byte, int64, error) {
	rows, err := s.db.QueryContext(ctx,
		`SELECT seq, event FROM run_events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?`, runID, after, limit)
	if err != nil {
		return nil, after, err
	}
	defer rows.Close()
	var out [][]byte
	last := after
	for rows.Next() {
		var ev []byte
		if err := rows.Scan(&last, &ev); err != nil {
			return nil, after, err
		}
		out = append(out, ev)
	}
	return out, last, rows.Err()
}
