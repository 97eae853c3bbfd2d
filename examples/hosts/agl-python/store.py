"""The operation store: one SQLite file, every write in a BEGIN IMMEDIATE
transaction so that hosts sharing the file serialize their claims through
SQLite's write lock (docs/agl-binding.md section 6)."""

import contextlib
import sqlite3
import threading

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS contracts (name TEXT PRIMARY KEY, version TEXT NOT NULL, fp TEXT NOT NULL, doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS contract_history (name TEXT NOT NULL, version TEXT NOT NULL, fp TEXT NOT NULL, PRIMARY KEY (name, version));
CREATE TABLE IF NOT EXISTS agents (id TEXT PRIMARY KEY, principal TEXT NOT NULL, tools TEXT NOT NULL, ceiling TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS grants (
  id TEXT PRIMARY KEY, token_hash TEXT NOT NULL UNIQUE, issuer TEXT NOT NULL, subject TEXT NOT NULL,
  operations TEXT NOT NULL, resources TEXT NOT NULL, not_before INTEGER NOT NULL, expires_at INTEGER NOT NULL,
  parent_id TEXT, revoked_at INTEGER);
CREATE TABLE IF NOT EXISTS resources (
  id TEXT PRIMARY KEY, kind TEXT NOT NULL, owner TEXT NOT NULL, revision INTEGER NOT NULL, state TEXT NOT NULL,
  last_operation TEXT);
CREATE TABLE IF NOT EXISTS revisions (
  resource_id TEXT NOT NULL, revision INTEGER NOT NULL, payload TEXT NOT NULL, payload_digest TEXT NOT NULL,
  handle TEXT NOT NULL UNIQUE, PRIMARY KEY (resource_id, revision));
CREATE TABLE IF NOT EXISTS proposals (
  id TEXT PRIMARY KEY, operation_id TEXT NOT NULL UNIQUE, execution_id TEXT NOT NULL, principal TEXT NOT NULL,
  agent_id TEXT NOT NULL, operation TEXT NOT NULL, contract_fp TEXT NOT NULL, impl_fp TEXT NOT NULL,
  policy_fp TEXT NOT NULL, grant_id TEXT NOT NULL, snapshot TEXT NOT NULL, digest TEXT NOT NULL,
  resource_id TEXT, revision INTEGER, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS requests (
  id TEXT PRIMARY KEY, proposal_id TEXT NOT NULL, role TEXT NOT NULL, ttl INTEGER NOT NULL, status TEXT NOT NULL,
  approver TEXT, reason TEXT, decided_at INTEGER, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS permits (
  id TEXT PRIMARY KEY, token_hash TEXT NOT NULL UNIQUE, proposal_id TEXT NOT NULL, request_id TEXT NOT NULL,
  approver TEXT NOT NULL, issued_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, revoked_at INTEGER,
  consumed_at INTEGER, consumed_by TEXT);
CREATE TABLE IF NOT EXISTS operations (
  id TEXT PRIMARY KEY, execution_id TEXT NOT NULL, proposal_id TEXT, permit_id TEXT, operation TEXT NOT NULL,
  principal TEXT NOT NULL, agent_id TEXT NOT NULL, digest TEXT NOT NULL, state TEXT NOT NULL,
  attempt INTEGER NOT NULL DEFAULT 0, owner TEXT, outcome TEXT, reconciliation TEXT,
  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS audit (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, operation_id TEXT, execution_id TEXT, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS instances (id TEXT PRIMARY KEY, heartbeat_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS scopes (
  id TEXT PRIMARY KEY, execution_id TEXT NOT NULL, parent_id TEXT, tool_calls INTEGER NOT NULL,
  used INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS scopes_root ON scopes(execution_id) WHERE parent_id IS NULL;
CREATE TABLE IF NOT EXISTS barriers (
  id TEXT PRIMARY KEY, points TEXT NOT NULL, parties INTEGER NOT NULL, arrived INTEGER NOT NULL, deadline INTEGER NOT NULL);
"""


class Abort(Exception):
    """Carries a refusal out of a transaction, which is rolled back."""

    def __init__(self, denial):
        super().__init__(str(denial))
        self.denial = denial


class Store:
    def __init__(self, path, busy_ms):
        self.path = path
        self.busy_ms = busy_ms
        self.local = threading.local()
        # IF NOT EXISTS makes this safe for two hosts opening one file.
        self.conn().executescript(SCHEMA)

    def conn(self):
        c = getattr(self.local, "c", None)
        if c is None:
            c = sqlite3.connect(self.path, timeout=self.busy_ms / 1000.0, isolation_level=None, check_same_thread=False)
            c.execute("PRAGMA journal_mode=WAL")
            c.execute("PRAGMA synchronous=FULL")
            c.execute("PRAGMA busy_timeout=%d" % self.busy_ms)
            c.row_factory = sqlite3.Row
            self.local.c = c
        return c

    @contextlib.contextmanager
    def tx(self):
        c = self.conn()
        c.execute("BEGIN IMMEDIATE")
        try:
            yield c
        except BaseException:
            try:
                c.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise
        else:
            c.execute("COMMIT")

    def one(self, sql, *args):
        return self.conn().execute(sql, args).fetchone()

    def all(self, sql, *args):
        return self.conn().execute(sql, args).fetchall()
