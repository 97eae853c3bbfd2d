package agl

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/parley-conformance/parley/refhost/sqlitetpl"
	_ "modernc.org/sqlite" // pure-Go driver "sqlite": go install works without cgo
)

// The OperationStore is one SQLite database. Cross-process mutual exclusion
// comes from SQLite's own write lock: every mutating transaction starts with
// BEGIN IMMEDIATE (driver option _txlock=immediate), so two hosts on one file
// serialize their claims instead of discovering a conflict at commit. WAL lets
// readers proceed while a claim is being written; busy_timeout makes a
// contending writer wait for the lock rather than fail.
const schemaSQL = `
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS contracts (
  qualified_name TEXT PRIMARY KEY,
  contract_version TEXT NOT NULL,
  contract_fp TEXT NOT NULL,
  implementation TEXT NOT NULL,
  implementation_fp TEXT NOT NULL,
  doc TEXT NOT NULL,
  registered_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS contract_history (
  qualified_name TEXT NOT NULL, contract_version TEXT NOT NULL, contract_fp TEXT NOT NULL,
  doc TEXT NOT NULL, registered_at INTEGER NOT NULL,
  PRIMARY KEY (qualified_name, contract_version)
);
CREATE TABLE IF NOT EXISTS agents (
  agent_id TEXT PRIMARY KEY,
  principal TEXT NOT NULL,
  tools TEXT NOT NULL,
  effect_ceiling TEXT NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS grants (
  id TEXT PRIMARY KEY,
  token_hash TEXT NOT NULL UNIQUE,
  issuer TEXT NOT NULL,
  subject TEXT NOT NULL,
  operations TEXT NOT NULL,
  resources TEXT NOT NULL,
  not_before INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  parent_id TEXT,
  revoked_at INTEGER,
  created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS resources (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  owner TEXT NOT NULL,
  revision INTEGER NOT NULL,
  state TEXT NOT NULL,
  payload TEXT NOT NULL,
  payload_digest TEXT NOT NULL,
  last_operation TEXT,
  updated_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS resource_revisions (
  resource_id TEXT NOT NULL, revision INTEGER NOT NULL,
  payload TEXT NOT NULL, payload_digest TEXT NOT NULL, handle TEXT NOT NULL UNIQUE,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (resource_id, revision)
);
CREATE TABLE IF NOT EXISTS proposals (
  id TEXT PRIMARY KEY,
  operation_id TEXT NOT NULL UNIQUE,
  execution_id TEXT NOT NULL,
  principal TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  qualified_name TEXT NOT NULL,
  contract_fp TEXT NOT NULL,
  implementation_fp TEXT NOT NULL,
  policy_fp TEXT NOT NULL,
  grant_id TEXT NOT NULL,
  snapshot TEXT NOT NULL,
  digest TEXT NOT NULL,
  resource_id TEXT,
  revision INTEGER,
  created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS approval_requests (
  id TEXT PRIMARY KEY,
  proposal_id TEXT NOT NULL,
  role TEXT NOT NULL,
  ttl_seconds INTEGER NOT NULL,
  status TEXT NOT NULL,
  approver TEXT,
  reason TEXT,
  decided_at INTEGER,
  created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS permits (
  id TEXT PRIMARY KEY,
  token_hash TEXT NOT NULL UNIQUE,
  proposal_id TEXT NOT NULL,
  request_id TEXT NOT NULL,
  approver TEXT NOT NULL,
  issued_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  revoked_at INTEGER,
  consumed_at INTEGER,
  consumed_by TEXT
);
CREATE TABLE IF NOT EXISTS operations (
  id TEXT PRIMARY KEY,
  execution_id TEXT NOT NULL,
  proposal_id TEXT,
  permit_id TEXT,
  qualified_name TEXT NOT NULL,
  principal TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  snapshot_digest TEXT NOT NULL,
  state TEXT NOT NULL,
  attempt INTEGER NOT NULL DEFAULT 0,
  idempotency_key TEXT NOT NULL,
  owner_instance TEXT,
  outcome TEXT,
  reconciliation TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS operations_state ON operations(state, owner_instance);
CREATE TABLE IF NOT EXISTS audit (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  at INTEGER NOT NULL,
  event TEXT NOT NULL,
  record TEXT NOT NULL,
  operation_id TEXT,
  execution_id TEXT
);
CREATE INDEX IF NOT EXISTS audit_op ON audit(operation_id);
CREATE INDEX IF NOT EXISTS audit_exec ON audit(execution_id);
CREATE TABLE IF NOT EXISTS scopes (
  id TEXT PRIMARY KEY,
  execution_id TEXT NOT NULL,
  parent_id TEXT,
  tool_calls INTEGER NOT NULL,
  used INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS scopes_root ON scopes(execution_id) WHERE parent_id IS NULL;
CREATE TABLE IF NOT EXISTS seam_barriers (
  id TEXT PRIMARY KEY,
  points TEXT NOT NULL,
  parties INTEGER NOT NULL,
  arrived INTEGER NOT NULL,
  deadline INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS instances (
  id TEXT PRIMARY KEY,
  heartbeat_at INTEGER NOT NULL,
  started_at INTEGER NOT NULL
);
`

type store struct {
	db *sql.DB
	// stmts holds the hot statements (hot), prepared when the store opens.
	// Read-only afterwards.
	stmts map[string]*sql.Stmt
}

// hotSQL lists the statements every dispatch runs. SQLite parsing a
// statement costs about as much as running it; these are parsed once per
// connection instead of once per call (database/sql keeps a prepared copy
// on each connection that ran one, and Tx.Stmt reuses the transaction's
// connection's copy).
var hotSQL []string

// hot registers query as a hot statement and returns it unchanged. Call it
// only from package-level variable initialisers, so that every hot statement
// is known before a store opens.
func hot(query string) string {
	hotSQL = append(hotSQL, query)
	return query
}

// row runs query through q (the store's pool or one of its transactions),
// prepared when it is a hot statement, as written otherwise.
func (s *store) row(ctx context.Context, q querier, query string, args ...any) *sql.Row {
	if st := s.stmts[query]; st != nil {
		switch q := q.(type) {
		case *sql.Tx:
			return q.StmtContext(ctx, st).QueryRowContext(ctx, args...)
		case *sql.DB:
			if q == s.db {
				return st.QueryRowContext(ctx, args...)
			}
		}
	}
	return q.QueryRowContext(ctx, query, args...)
}

// exec runs query in tx, prepared when it is a hot statement.
func (s *store) exec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	if st := s.stmts[query]; st != nil {
		return tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, query, args...)
}

// openStore opens the operation store at path, creating it (from a copy of
// an empty one, sqlitetpl) when there is none.
func openStore(path string, busy time.Duration) (*store, error) {
	err := sqlitetpl.Seed("agl", path, func(p string) error {
		s, err := initStore(p, busy)
		if err != nil {
			return err
		}
		return s.close()
	})
	if err != nil {
		return nil, fmt.Errorf("agl: create operation store %s: %w", path, err)
	}
	return initStore(path, busy)
}

// schemaVersion is the store's PRAGMA user_version once schemaSQL and every
// migration have run on it. A change to the schema is a new migration
// (never an edit of schemaSQL), so that existing stores run it once.
const schemaVersion = 2

// migrations[v] takes a store from version v+1 to v+2; schemaSQL is
// version 1.
var migrations = []string{migrateV2}

func initStore(path string, busy time.Duration) (*store, error) {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	// FULL: a committed claim must survive power loss, or a restarted host
	// could hand the same permit out again.
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(ON)")
	q.Set("_txlock", "immediate")
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(4)
	db.SetConnMaxIdleTime(time.Minute)
	s := &store{db: db}
	ctx, cancel := context.WithTimeout(context.Background(), busy+5*time.Second)
	defer cancel()
	// A store whose user_version says its schema is in place opens without
	// running the DDL again: parsing it was most of a new host's start-up.
	var version int
	if err := db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		db.Close()
		return nil, fmt.Errorf("agl: read the schema version of %s: %w", path, err)
	}
	if version < schemaVersion {
		err = s.tx(ctx, func(tx *sql.Tx) error {
			// Read again under the write lock: another host opening the
			// same file may have migrated it since (ALTER TABLE is not
			// idempotent as CREATE ... IF NOT EXISTS is).
			if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
				return err
			}
			if version < 1 {
				if _, err := tx.ExecContext(ctx, schemaSQL); err != nil {
					return err
				}
				version = 1
			}
			for ; version < schemaVersion; version++ {
				if _, err := tx.ExecContext(ctx, migrations[version-1]); err != nil {
					return fmt.Errorf("migrate to version %d: %w", version+1, err)
				}
			}
			if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO meta(k,v) VALUES('schema_version',?)`, fmt.Sprint(schemaVersion)); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion))
			return err
		})
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("agl: initialise operation store %s: %w", path, err)
	}
	// Prepared on one connection now; each other connection prepares its
	// own copy the first time it runs one, on that connection, so a
	// transaction never asks the pool for a second connection to do it.
	s.stmts = make(map[string]*sql.Stmt, len(hotSQL))
	for _, q := range hotSQL {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("agl: prepare %q: %w", q, err)
		}
		s.stmts[q] = st
	}
	return s, nil
}

// errAbort carries a denial out of a transaction, which is rolled back.
type errAbort struct{ d *Denial }

func (e errAbort) Error() string { return e.d.Code }

// tx runs fn in one BEGIN IMMEDIATE transaction and commits it.
// A panic inside fn (a handler aborted by the halt seam, or a bug) rolls the
// transaction back before it propagates, so the write lock is never leaked.
func (s *store) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if p := recover(); p != nil {
			tx.Rollback()
			panic(p)
		}
	}()
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (s *store) close() error {
	for _, st := range s.stmts {
		st.Close()
	}
	return s.db.Close()
}

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }
