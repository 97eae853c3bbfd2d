#!/usr/bin/env python3
"""A second host of the parley AGL binding agl-binding/1, in Python with the
standard library only, written from docs/hosts/agl.md, docs/agl-binding.md
and the AGL proposal. Run it the way parley's exec target does:

    python3 aglhost.py CONFIG.json

It prints {"parley":"ready","http":"http://127.0.0.1:PORT"} once it serves.
"""

import fcntl
import hashlib
import hmac
import http.client
import json
import os
import re
import secrets
import signal
import socket
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import canon  # noqa: E402
import evidence  # noqa: E402
import typespec  # noqa: E402
import delegation  # noqa: E402
from store import Abort, Store  # noqa: E402

BINDING = "agl-binding/1"
PREFIX = "/agl/v1"
SEAMS = "/conformance/seams/agl"
FAILURE_KINDS = ["destination_error", "timeout", "connection_lost", "unreadable_receipt"]


# --- refusals ----------------------------------------------------------------

class Denial(Exception):
    def __init__(self, status, code, category, step, message, detail=None, retryable=False):
        super().__init__(code)
        self.status, self.code, self.category, self.step = status, code, category, step
        self.message, self.detail, self.retryable = message, detail, retryable

    def body(self):
        e = {"code": self.code, "category": self.category, "message": self.message, "retryable": self.retryable}
        if self.step:
            e["step"] = self.step
        if self.detail is not None:
            e["detail"] = self.detail
        return {"error": e}


def deny(status, code, category, step, message, detail=None, retryable=False):
    return Denial(status, code, category, step, message, detail, retryable)


def ts(ms):
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (ms % 1000)


def parse_time(s):
    if not isinstance(s, str):
        raise ValueError("not a time")
    t = s.replace("Z", "+00:00")
    return int(datetime.fromisoformat(t).timestamp() * 1000)


def token(prefix):
    return prefix + secrets.token_hex(32)


def thash(t):
    return hashlib.sha256(t.encode("utf-8")).hexdigest()


def new_id(prefix):
    return prefix + str(uuid.uuid4())


def jdump(v):
    return canon.dumps(v)


def jload(s):
    return None if s is None else canon.parse(s)


# --- trusted implementations ---------------------------------------------------

IMPLEMENTATIONS = [
    {"name": "email.send/v1", "effects": ["external_write", "email_send"], "resource_kind": "email_draft",
     "protocol": "email/1", "destination": "email", "read": False},
    {"name": "webhook.post/v1", "effects": ["external_write"], "destination": "webhook", "read": False},
    {"name": "email.status/v1", "effects": ["external_read"], "destination": "email", "read": True},
]
for _im in IMPLEMENTATIONS:
    _desc = {k: v for k, v in _im.items() if k in ("name", "effects", "resource_kind", "protocol", "destination")}
    _im["fingerprint"] = canon.digest(_desc)[0]
IMPL = {im["name"]: im for im in IMPLEMENTATIONS}
LEGACY_TOOLS = {"legacy.echo": "returns its arguments unchanged"}

DRAFT_TYPE = {"type": "object", "required": ["from", "to", "subject", "body"], "properties": {
    "from": {"type": "string", "minLength": 3, "maxLength": 320},
    "to": {"type": "array", "minItems": 1, "maxItems": 100, "items": {"type": "string", "minLength": 3, "maxLength": 320}},
    "cc": {"type": "array", "maxItems": 100, "items": {"type": "string", "minLength": 3, "maxLength": 320}, "default": []},
    "subject": {"type": "string", "maxLength": 998},
    "body": {"type": "string", "maxLength": 262144},
    "priority": {"type": "string", "enum": ["low", "normal", "high"], "default": "normal"},
}}


def strict(body, allowed, required=()):
    if not isinstance(body, dict):
        raise deny(400, "malformed_request", "schema_error", 0, "the body must be a JSON object")
    extra = set(body) - set(allowed)
    if extra:
        raise deny(400, "malformed_request", "schema_error", 0, "unknown members %s" % sorted(extra))
    for r in required:
        if r not in body:
            raise deny(422, "schema_error", "schema_error", 0, "%s is required" % r)
    return body


def differs(a, b):
    """The snapshot members whose values differ; arguments by member."""
    out = []
    for k in sorted(set(a) | set(b)):
        if canon.same_value(a.get(k), b.get(k)):
            continue
        if k == "arguments" and isinstance(a.get(k), dict) and isinstance(b.get(k), dict):
            out += ["arguments/" + m for m in differs(a[k], b[k])]
        else:
            out.append(k)
    return out


class Flight:
    """A dispatch in progress, so that it can be cancelled."""

    def __init__(self):
        self.lock = threading.Lock()
        self.cancelled = False
        self.claimed = False
        self.decided = threading.Event()
        self.op_id = None
        self.conn = None

    def cancel(self):
        with self.lock:
            self.cancelled = True
            conn = self.conn
        if conn is not None and conn.sock is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.decided.wait(10)
        with self.lock:
            return self.claimed

    def decide(self, claimed):
        with self.lock:
            self.claimed = self.claimed or claimed
        self.decided.set()

    def is_cancelled(self):
        with self.lock:
            return self.cancelled


class Halted(Exception):
    """The instance died at a seam's halt: drop the request unanswered."""


class Host:
    def __init__(self, cfg, state_dir, seams):
        self.cfg = cfg
        self.seams = seams
        d = lambda k, v: cfg.get(k) if isinstance(cfg.get(k), int) and cfg.get(k) > 0 else v  # noqa: E731
        self.lease = d("claim_lease_ms", 10000)
        self.handler_timeout = d("handler_timeout_ms", 10000)
        self.capacity = d("max_concurrent_dispatches", 32)
        self.admission_wait = d("admission_wait_ms", 2000)
        self.max_ttl = d("max_approval_ttl_seconds", 86400)
        self.retention = d("retention_ms", 30 * 24 * 3600 * 1000)
        self.retention_every = d("retention_sweep_ms", 3600000)
        self.keys = cfg.get("keys", {})
        self.issuer = cfg.get("authority_issuer") or "agl-python-authority"
        self.deployment = cfg.get("deployment", {})
        self.dest = {"email": cfg.get("email", {}), "webhook": cfg.get("webhook", {})}
        self.policy_fp = canon.digest({"deployment": self.deployment, "binding": BINDING, "canon": canon.CANON_VERSION})[0]
        db = cfg.get("database_path") or os.path.join(state_dir, "agl.db")
        os.makedirs(os.path.dirname(db), exist_ok=True)
        self.store = Store(db, d("busy_timeout_ms", 15000))
        self.evidence = evidence.Evidence(self, deny, strict, new_id, ts, jdump, jload)  # evidence.py
        delegation.migrate(self.store)
        self.instance = new_id("inst_")
        # Liveness beyond the heartbeat: an instance holds an exclusive lock
        # on a file of its own beside the store for as long as its process
        # lives, and the kernel drops it when the process dies, however it
        # dies. A host that can take an instance's lock knows that instance
        # stopped, and settles its claims without waiting out the lease.
        # Every host sharing a SQLite store in WAL mode is on this machine.
        self.locks_dir = db + ".instances"
        os.makedirs(self.locks_dir, exist_ok=True)
        self.life = open(os.path.join(self.locks_dir, self.instance + ".lock"), "w")
        fcntl.flock(self.life, fcntl.LOCK_EX)
        self.clock_offset = 0
        self.stop = threading.Event()
        self.faults = []
        self.flock = threading.Lock()
        self.slots = threading.BoundedSemaphore(self.capacity)
        self.in_use = 0
        self.waiting = 0
        self.reserved = {}
        self.adm = threading.Lock()
        # Destination accounts with an admission limit of their own, by
        # (account, url): {"account", "slots", "capacity", "in_use", "waiting", "wait"}.
        self.gates = {}
        for dd in self.dest.values():
            for a in [dd] + list(dd.get("accounts") or []):
                if isinstance(a.get("max_concurrent_dispatches"), int) and a["max_concurrent_dispatches"] > 0:
                    n = a["max_concurrent_dispatches"]
                    self.gates[(a.get("account", ""), a.get("url", ""))] = {
                        "account": a.get("account", ""), "slots": threading.BoundedSemaphore(n), "capacity": n, "in_use": 0, "waiting": 0,
                        "wait": a.get("admission_wait_ms") or self.admission_wait}
        self.flights = {}
        # Recovery sweeps under way and the resumptions they started: POST
        # recover answers only once none is left (the binding: the seam
        # answers when every resumption in flight has decided).
        self.resuming = 0
        self.resumed = threading.Condition()
        with self.store.tx() as c:
            c.execute("INSERT OR IGNORE INTO meta(k,v) VALUES('audit_key',?)", (secrets.token_hex(32),))
            self.audit_key = bytes.fromhex(c.execute("SELECT v FROM meta WHERE k='audit_key'").fetchone()[0])
        self.heartbeat()
        self.recover()
        threading.Thread(target=self.sweeper, daemon=True).start()
        threading.Thread(target=self.retention_loop, daemon=True).start()

    # -- time, audit, keys --------------------------------------------------

    def now(self):
        return int(time.time() * 1000) + self.clock_offset

    def audit(self, c, rec):
        rec = {k: v for k, v in rec.items() if v is not None and v != ""}
        rec["at"] = ts(self.now())
        rec["host_instance"] = self.instance
        c.execute("INSERT INTO audit(operation_id, execution_id, record) VALUES(?,?,?)",
                  (rec.get("operation_id"), rec.get("execution_id"), jdump(rec)))

    def require(self, headers, role, *keys):
        auth = headers.get("Authorization", "")
        got = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
        if not got:
            raise deny(401, "unauthenticated", "authorization_denied", 0, "this endpoint needs the %s key" % role)
        for k in keys:
            if k and hmac.compare_digest(got.encode(), k.encode()):
                return
        raise deny(403, "wrong_credentials", "authorization_denied", 0, "the bearer token is not the %s key" % role)

    def bearer(self, headers):
        auth = headers.get("Authorization", "")
        return auth[7:].strip() if auth[:7].lower() == "bearer " else ""

    # -- seams: faults and the barrier -----------------------------------------

    def fire(self, boundary, operation, flight=None):
        with self.flock:
            ft = None
            for f in self.faults:
                if f["boundary"] == boundary and f.get("operation") in (None, "", operation) and f["fired"] < f["count"]:
                    f["fired"] += 1
                    ft = dict(f)
                    break
        if ft is None:
            return None
        action = ft["action"]
        if action == "delay":
            end = time.time() + ft.get("delay_ms", 0) / 1000.0
            while time.time() < end and not self.stop.is_set() and not (flight and flight.is_cancelled()):
                time.sleep(0.005)
            return None
        if action in ("halt", "exit"):
            sys.stdout.flush()
            os._exit(ft.get("exit_code") or 86)
        return "fail"

    @staticmethod
    def barrier_id(resource_id):
        """A barrier for the whole host, or for the requests about one resource."""
        return "resource:" + resource_id if resource_id else "barrier"

    @staticmethod
    def ev_resource(ev):
        for h in ev["handles"].values():
            return h["resource_id"]
        return ""

    def meet(self, point, resource_id=""):
        if not self.seams:
            return
        if self.store.one("SELECT count(*) FROM barriers")[0] == 0:
            return
        ids = ([self.barrier_id(resource_id)] if resource_id else []) + ["barrier"]
        with self.store.tx() as c:
            for bid in ids:
                row = c.execute("SELECT points, parties, arrived, deadline FROM barriers WHERE id=?", (bid,)).fetchone()
                if row is not None and point in json.loads(row["points"]) and row["arrived"] < row["parties"]:
                    break
            else:
                return
            c.execute("UPDATE barriers SET arrived=arrived+1 WHERE id=?", (bid,))
            parties, deadline = row["parties"], row["deadline"]
        while time.time() * 1000 < deadline and not self.stop.is_set():
            r = self.store.one("SELECT arrived FROM barriers WHERE id=?", bid)
            if r is None or r[0] >= parties:
                return
            time.sleep(0.005)

    # -- background work ---------------------------------------------------------

    def heartbeat(self):
        with self.store.tx() as c:
            c.execute("INSERT INTO instances(id, heartbeat_at) VALUES(?,?) ON CONFLICT(id) DO UPDATE SET heartbeat_at=excluded.heartbeat_at",
                      (self.instance, self.now()))

    def sweeper(self):
        while not self.stop.wait(max(self.lease / 4000.0, 0.05)):
            try:
                self.heartbeat()
                self.recover()
            except Exception as e:  # noqa: BLE001
                log("sweep failed: %s" % e)

    def retention_loop(self):
        while not self.stop.wait(self.retention_every / 1000.0):
            try:
                self.sweep_retention()
            except Exception as e:  # noqa: BLE001
                log("retention sweep failed: %s" % e)

    def shutdown(self):
        self.stop.set()
        try:
            with self.store.tx() as c:
                c.execute("DELETE FROM instances WHERE id=?", (self.instance,))
            os.unlink(os.path.join(self.locks_dir, self.instance + ".lock"))
        except Exception:  # noqa: BLE001
            pass

    def stopped(self, owner):
        """Whether instance owner is known to have stopped: it held the lock
        on its file for as long as its process lived. Without a lock file
        (an instance of another build) nothing is known."""
        if not owner or owner == self.instance or not re.fullmatch(r"[A-Za-z0-9_-]+", owner):
            return False
        path = os.path.join(self.locks_dir, owner + ".lock")
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        try:
            os.unlink(path)
        except OSError:
            pass
        os.close(fd)
        return True

    # -- helpers for rows ---------------------------------------------------------

    def contract(self, name, c=None):
        row = (c or self.store.conn()).execute("SELECT doc, fp FROM contracts WHERE name=?", (name,)).fetchone()
        if row is None:
            return None
        doc = canon.parse(row["doc"])
        doc["_fp"] = row["fp"]
        return doc

    def grant_by_token(self, tok, c=None):
        return (c or self.store.conn()).execute("SELECT * FROM grants WHERE token_hash=?", (thash(tok),)).fetchone()

    def grant_by_id(self, gid, c=None):
        return (c or self.store.conn()).execute("SELECT * FROM grants WHERE id=?", (gid,)).fetchone()

    def grant_view(self, g):
        return {"grant_id": g["id"], "issuer": g["issuer"], "subject": g["subject"], "operations": json.loads(g["operations"]),
                "resources": json.loads(g["resources"]), "not_before": ts(g["not_before"]), "expires_at": ts(g["expires_at"]),
                "parent_grant_id": g["parent_id"], "revoked_at": ts(g["revoked_at"]), "max_uses": g["max_uses"]}

    def check_chain(self, g, step, c=None):
        now = self.now()
        cur, depth = g, 0
        while cur is not None and depth < 32:
            try:
                if cur["revoked_at"] is not None:
                    raise deny(403, "grant_revoked", "authorization_denied", step, "grant %s is revoked" % cur["id"])
                if now >= cur["expires_at"]:
                    raise deny(403, "grant_expired", "authorization_denied", step, "grant %s expired" % cur["id"])
                if now < cur["not_before"]:
                    raise deny(403, "grant_not_yet_valid", "authorization_denied", step, "grant %s is not valid yet" % cur["id"])
                if step in (6, 7):  # a claim needs a use left (delegation.py)
                    delegation.uses_left(c or self.store.conn(), cur, step, deny)
            except Denial as d:
                raise delegation.name_bound(d, g, cur)
            if not cur["parent_id"]:
                return
            cur = self.grant_by_id(cur["parent_id"], c)
            depth += 1
        raise deny(403, "grant_revoked", "authorization_denied", step, "the grant's chain is broken")

    @staticmethod
    def covers_op(g, op):
        ops = json.loads(g["operations"])
        return op in ops or "*" in ops

    @staticmethod
    def covers_resource(g, kind, rid):
        for s in json.loads(g["resources"]):
            if s["kind"] == kind and (rid in s["ids"] or "*" in s["ids"]):
                return True
        return False

    def permit_by_token(self, tok, c=None):
        return (c or self.store.conn()).execute("SELECT * FROM permits WHERE token_hash=?", (thash(tok),)).fetchone()

    def permit_by_id(self, pid, c=None):
        return (c or self.store.conn()).execute("SELECT * FROM permits WHERE id=?", (pid,)).fetchone()

    def permit_view(self, p):
        return {"permit_id": p["id"], "proposal_id": p["proposal_id"], "request_id": p["request_id"], "approver": p["approver"],
                "issued_at": ts(p["issued_at"]), "expires_at": ts(p["expires_at"]), "revoked_at": ts(p["revoked_at"]),
                "consumed_at": ts(p["consumed_at"]), "consumed_by_operation": p["consumed_by"]}

    def proposal(self, pid, c=None):
        return (c or self.store.conn()).execute("SELECT * FROM proposals WHERE id=?", (pid,)).fetchone()

    def proposal_view(self, p):
        snap = canon.parse(p["snapshot"])
        v = {"proposal_id": p["id"], "operation_id": p["operation_id"], "execution_id": p["execution_id"], "principal": p["principal"],
             "agent_id": p["agent_id"], "operation": p["operation"], "contract_fingerprint": p["contract_fp"],
             "implementation_fingerprint": p["impl_fp"], "policy_fingerprint": p["policy_fp"], "grant_id": p["grant_id"],
             "canon_version": canon.CANON_VERSION, "digest": p["digest"], "snapshot": snap, "canonical_encoding": canon.encode(snap),
             "created_at": ts(p["created_at"])}
        if p["resource_id"]:
            v["resource"] = {"resource_id": p["resource_id"], "revision": p["revision"]}
        return v

    def operation(self, oid, c=None):
        return (c or self.store.conn()).execute("SELECT * FROM operations WHERE id=?", (oid,)).fetchone()

    def op_view(self, o):
        return {"operation_id": o["id"], "execution_id": o["execution_id"], "proposal_id": o["proposal_id"], "permit_id": o["permit_id"],
                "operation": o["operation"], "principal": o["principal"], "agent_id": o["agent_id"], "snapshot_digest": o["digest"],
                "state": o["state"], "attempt": o["attempt"], "idempotency_key": o["id"], "outcome": jload(o["outcome"]),
                "reconciliation": jload(o["reconciliation"]), "awaiting_reconciliation": o["state"] == "Unknown",
                "created_at": ts(o["created_at"]), "updated_at": ts(o["updated_at"])}

    def resource(self, rid, c=None):
        return (c or self.store.conn()).execute(
            "SELECT r.*, v.payload, v.payload_digest, v.handle FROM resources r JOIN revisions v ON v.resource_id=r.id AND v.revision=r.revision WHERE r.id=?",
            (rid,)).fetchone()

    def resource_view(self, r):
        return {"resource_id": r["id"], "kind": r["kind"], "owner": r["owner"], "revision": r["revision"], "state": r["state"],
                "payload": canon.parse(r["payload"]), "payload_digest": r["payload_digest"], "handle": r["handle"],
                "last_operation_id": r["last_operation"]}

    def consumed_denial(self, p, step, c=None):
        o = self.operation(p["consumed_by"], c)
        state = o["state"] if o else None
        detail = {"operation_id": p["consumed_by"], "operation_state": state}
        if state == "Unknown":
            return deny(409, "uncertain_completion", "uncertain_completion", step,
                        "the permit was used by an operation whose outcome is not known; it awaits reconciliation", detail)
        return deny(409, "permit_consumed", "permit_claimed", step, "the permit was already claimed", detail)

    def field_digests(self, args):
        out = {}

        def walk(v, path):
            if isinstance(v, dict):
                if "resource_id" in v and "payload_digest" in v and "payload" in v:
                    walk(v["payload"], path + "/payload")
                    return
                for k, e in v.items():
                    walk(e, path + "/" + k.replace("~", "~0").replace("/", "~1"))
            elif isinstance(v, list):
                for i, e in enumerate(v):
                    walk(e, "%s/%d" % (path, i))
            else:
                out[path] = "hmac-sha256:" + hmac.new(self.audit_key, canon.encode(v).encode("utf-8"), hashlib.sha256).hexdigest()

        walk(args, "/arguments")
        return out

    # -- steps 1 to 4 -------------------------------------------------------------

    def evaluate(self, req, proposing, permit=None):
        for k in ("execution_id", "principal", "agent_id", "operation"):
            if not isinstance(req.get(k), str) or not req.get(k):
                raise deny(422, "schema_error", "schema_error", 2, "%s is required" % k)
        op = req["operation"]
        c = self.contract(op)
        if c is None:
            raise deny(422, "unknown_operation", "schema_error", 1, "no contract is registered for %s" % op)
        im = IMPL.get(c["implementation"])
        if im is None or im["fingerprint"] != c["implementation_fingerprint"]:
            raise deny(409, "contract_fingerprint_mismatch", "proposal_mismatch", 1, "the contract does not match the trusted implementation")
        args_in = req.get("arguments")
        if args_in is None:
            args_in = {}
        handles = []
        try:
            args = typespec.materialize(c["input_type"], args_in, "/arguments", handles)
        except typespec.TypeError_ as e:
            raise deny(422, "schema_error", "schema_error", 2, str(e))
        resolved = {}
        for segs, kind, value in handles:
            row = self.store.one("SELECT v.*, r.kind, r.owner FROM revisions v JOIN resources r ON r.id=v.resource_id WHERE v.handle=?", value)
            if row is None or row["kind"] != kind:
                raise deny(422, "unknown_handle", "schema_error", 2, "/%s is not a %s handle issued by this host" % ("/".join(map(str, segs)), kind))
            payload = canon.parse(row["payload"])
            typespec.set_path(args, list(segs), {"resource_id": row["resource_id"], "kind": kind, "revision": row["revision"],
                                                 "payload_digest": row["payload_digest"], "payload": payload})
            resolved["/" + "/".join(map(str, segs))] = dict(resource_id=row["resource_id"], kind=kind, owner=row["owner"],
                                                          revision=row["revision"], payload=payload)
        agent = self.store.one("SELECT * FROM agents WHERE id=?", req["agent_id"])
        if agent is None:
            raise deny(403, "unknown_agent", "authorization_denied", 3, "no such agent")
        if agent["principal"] != req["principal"]:
            raise deny(403, "principal_mismatch", "authorization_denied", 3, "the agent acts for another principal")
        if op not in json.loads(agent["tools"]):
            raise deny(403, "tool_not_in_toolset", "authorization_denied", 3, "%s is not in the agent's tool set" % op)
        if op in self.deployment.get("disabled_operations", []):
            raise deny(403, "deployment_restricted", "authorization_denied", 3, "%s is disabled by deployment policy" % op)
        tok = req.get("grant_token") or ""
        g = self.grant_by_token(tok) if tok else None
        if g is None or g["subject"] != req["principal"]:
            raise deny(403, "authority_missing", "authorization_denied", 3, "no grant of this principal was presented")
        self.check_chain(g, 3)
        if not self.covers_op(g, op):
            raise deny(403, "authority_missing", "authorization_denied", 3, "the grant does not cover %s" % op)
        for ar in c.get("authority_requirements", []):
            sel, ok = typespec.pointer(args, ar["select"])
            ids = [sel] if isinstance(sel, str) else sel
            if not ok or not isinstance(ids, list) or not all(isinstance(x, str) for x in ids):
                raise deny(422, "schema_error", "schema_error", 3, "the authority selector %s selects no resource ids" % ar["select"])
            for rid in ids:
                if not self.covers_resource(g, ar["kind"], rid):
                    raise deny(403, "authority_missing", "authorization_denied", 3, "the grant does not cover %s %s" % (ar["kind"], rid))
        allowed = [d.lower() for d in self.deployment.get("allowed_recipient_domains", [])]
        for path, h in resolved.items():
            if h["owner"] != req["principal"]:
                raise deny(403, "authority_missing", "authorization_denied", 3, "the resource behind %s is another principal's" % path)
            if h["kind"] == "email_draft" and allowed:
                for rc in list(h["payload"].get("to", [])) + list(h["payload"].get("cc", [])):
                    domain = rc.rsplit("@", 1)[1].lower() if "@" in rc else ""
                    if domain not in allowed:
                        raise deny(403, "deployment_restricted", "authorization_denied", 3, "recipient %s is outside the allowed domains" % rc)
        for e in c["possible_effects"]:
            if e not in json.loads(agent["ceiling"]):
                raise deny(403, "effect_ceiling_exceeded", "authorization_denied", 4, "effect %s exceeds the agent's ceiling" % e)
        for pc in c.get("protocol_preconditions", []):
            h = resolved.get(pc["argument"])
            if h is None:
                raise deny(422, "schema_error", "schema_error", 4, "precondition argument %s is not a handle" % pc["argument"])
            cur = self.store.one("SELECT revision, state FROM resources WHERE id=?", h["resource_id"])
            if cur["revision"] != h["revision"]:
                raise deny(409, "stale_revision", "stale_revision", 4, "the handle names an old revision")
            want = "Draft" if proposing else pc["state"]
            if cur["state"] != want:
                if permit is not None:
                    fresh = self.permit_by_id(permit["id"])
                    if fresh["consumed_at"] is not None:
                        raise self.consumed_denial(fresh, 4)
                raise deny(409, "invalid_protocol_state", "invalid_protocol_state", 4, "the resource is %s; this needs %s" % (cur["state"], want))
        dest = self.destination(im, c)
        snap = {"canon_version": canon.CANON_VERSION, "operation": op, "contract_version": c["contract_version"],
                "contract_fingerprint": c["_fp"], "implementation_fingerprint": c["implementation_fingerprint"],
                "policy_fingerprint": self.policy_fp, "execution_id": req["execution_id"], "principal": req["principal"],
                "agent_id": req["agent_id"], "grant_id": g["id"], "arguments": args,
                "deployment": {"destination": dest.get("url", ""), "account": dest.get("account", ""),
                               "destination_idempotent": bool(dest.get("honours_idempotency_key", False))}}
        try:
            dg = canon.digest(snap)[0]
        except canon.CanonError as e:
            raise deny(422, "schema_error", "schema_error", 2, str(e))
        return {"contract": c, "impl": im, "agent": agent, "grant": g, "args": args, "handles": resolved, "snapshot": snap, "digest": dg}

    def insert_proposal(self, c, ev, req, op_state):
        p = {"id": new_id("prop_"), "operation_id": new_id("op_"), "resource_id": None, "revision": None}
        for pc in ev["contract"].get("protocol_preconditions", []):
            h = ev["handles"].get(pc["argument"])
            if h:
                p["resource_id"], p["revision"] = h["resource_id"], h["revision"]
        now = self.now()
        c.execute("INSERT INTO proposals VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                  (p["id"], p["operation_id"], req["execution_id"], req["principal"], req["agent_id"], req["operation"],
                   ev["contract"]["_fp"], ev["contract"]["implementation_fingerprint"], self.policy_fp, ev["grant"]["id"],
                   jdump(ev["snapshot"]), ev["digest"], p["resource_id"], p["revision"], now))
        if op_state:
            c.execute("INSERT INTO operations(id, execution_id, proposal_id, operation, principal, agent_id, digest, state, created_at, updated_at) VALUES(?,?,?,?,?,?,?,?,?,?)",
                      (p["operation_id"], req["execution_id"], p["id"], req["operation"], req["principal"], req["agent_id"], ev["digest"], op_state, now, now))
        return c.execute("SELECT * FROM proposals WHERE id=?", (p["id"],)).fetchone()

    def op_audit(self, event, p, permit=None, **extra):
        rec = {"event": event, "execution_id": p["execution_id"], "operation_id": p["operation_id"], "qualified_name": p["operation"],
               "principal": p["principal"], "agent_id": p["agent_id"], "contract_fingerprint": p["contract_fp"],
               "policy_fingerprint": p["policy_fp"], "resource_id": p["resource_id"], "resource_revision": p["revision"],
               "proposal_id": p["id"], "proposal_digest": p["digest"], "grant_id": p["grant_id"]}
        if permit is not None:
            rec.update({"permit_id": permit["id"], "decision_actor": permit["approver"], "decision_at": ts(permit["issued_at"])})
        rec.update(extra)
        return rec

    # -- info, implementations, contracts, agents -------------------------------

    def h_info(self, rq):
        return 200, {"binding_version": BINDING, "canon_version": canon.CANON_VERSION, "digest_algorithm": "sha256",
                     "policy_fingerprint": self.policy_fp, "instance": self.instance, "instance_name": self.cfg.get("instance_name", ""),
                     "email_idempotent": bool(self.dest["email"].get("honours_idempotency_key", False)),
                     "webhook_idempotent": bool(self.dest["webhook"].get("honours_idempotency_key", False)),
                     "max_approval_ttl_secs": self.max_ttl}

    def h_implementations(self, rq):
        out = []
        for im in IMPLEMENTATIONS:
            d = self.dest[im["destination"]]
            accounts = ([d["account"]] if d.get("url") and d.get("account") else []) + [a.get("account") for a in d.get("accounts") or []]
            v = {"name": im["name"], "fingerprint": im["fingerprint"], "effects": im["effects"],
                 "destination_configured": bool(d.get("url") or d.get("accounts")),
                 "destination_idempotent": bool(d.get("honours_idempotency_key", False)), "destination_accounts": accounts}
            if im.get("resource_kind"):
                v["resource_kind"], v["protocol"] = im["resource_kind"], im["protocol"]
            out.append(v)
        return 200, {"implementations": out, "legacy_tools": [{"name": n, "description": d, "effects": []} for n, d in LEGACY_TOOLS.items()]}

    CONTRACT_MEMBERS = ("qualified_name", "contract_version", "implementation", "implementation_fingerprint", "input_type", "output_type",
                        "authority_requirements", "possible_effects", "protocol_preconditions", "protocol_outcomes",
                        "approval_requirement", "idempotency_contract", "scheduling_contract", "destination_account")

    def normalize_contract(self, b):
        def bad(msg):
            return deny(422, "invalid_contract", "schema_error", 0, msg)
        strict(b, self.CONTRACT_MEMBERS)
        name, ver = b.get("qualified_name"), b.get("contract_version")
        if not isinstance(name, str) or not name or re.search(r"[/ ]", name):
            raise bad("qualified_name must be a dotted name")
        if not isinstance(ver, str) or not ver:
            raise bad("contract_version is required")
        im = IMPL.get(b.get("implementation"))
        if im is None:
            raise deny(422, "unknown_implementation", "schema_error", 0, "no trusted implementation %r" % b.get("implementation"))
        if b.get("implementation_fingerprint") != im["fingerprint"]:
            raise deny(409, "implementation_fingerprint_mismatch", "proposal_mismatch", 0,
                       "implementation %s has fingerprint %s" % (im["name"], im["fingerprint"]))
        try:
            it = b.get("input_type")
            if not isinstance(it, dict) or it.get("type") != "object":
                raise typespec.TypeError_("input_type must be an object type")
            typespec.check(it)
            if b.get("output_type") is not None:
                typespec.check(b["output_type"])
        except typespec.TypeError_ as e:
            raise bad(str(e))
        effects = b.get("possible_effects")
        if not isinstance(effects, list) or not all(isinstance(e, str) for e in effects):
            raise bad("possible_effects must list effect names")
        for e in im["effects"]:
            if e not in effects:
                raise bad("possible_effects omit %s, which %s can perform" % (e, im["name"]))
        if "financial_write" in effects and "external_write" not in effects:
            raise bad("financial_write requires external_write as well")
        ars = b.get("authority_requirements") or []
        for a in ars:
            if not isinstance(a, dict) or not a.get("kind") or not str(a.get("select", "")).startswith("/") or set(a) - {"kind", "select"}:
                raise bad("an authority requirement is {kind, select: a JSON pointer}")
        appr = dict(b.get("approval_requirement") or {})
        if set(appr) - {"required", "role"}:
            raise bad("approval_requirement is {required, role}")
        appr["required"] = bool(appr.get("required", False))
        if appr["required"] and not appr.get("role"):
            appr["role"] = "operator"
        if im.get("resource_kind"):
            # A contract is a trusted declaration about the implementation:
            # a protocol-bound write claims its resource from Authorized,
            # lands in Sent / FailedNoEffect / Unknown (never back in a
            # reusable authorized state), and needs an approval.
            pre = b.get("protocol_preconditions") or []
            if len(pre) != 1 or not isinstance(pre[0], dict) or pre[0].get("state") != "Authorized":
                raise bad("%s requires one precondition: a %s handle argument in state Authorized" % (im["name"], im["resource_kind"]))
            if b.get("protocol_outcomes") != {"success": "Sent", "no_effect": "FailedNoEffect", "uncertain": "Unknown"}:
                raise bad("%s requires protocol_outcomes success=Sent no_effect=FailedNoEffect uncertain=Unknown" % im["name"])
            if not appr["required"]:
                raise bad("%s is an approval-protected operation" % im["name"])
        idem = dict(b.get("idempotency_contract") or {})
        idem.setdefault("kind", "none")
        if idem["kind"] not in ("none", "destination_key") or set(idem) - {"kind"}:
            raise bad("idempotency_contract.kind must be none or destination_key")
        sched = dict(b.get("scheduling_contract") or {})
        if set(sched) - {"max_attempts", "timeout_ms", "backoff_ms", "retry_on"}:
            raise bad("unknown scheduling_contract member")
        if not sched.get("max_attempts"):
            sched["max_attempts"] = 1
        if not isinstance(sched["max_attempts"], int) or not 1 <= sched["max_attempts"] <= 10:
            raise bad("max_attempts must be 1 to 10")
        if not 0 <= int(sched.get("backoff_ms", 0)) <= 60000:
            raise bad("backoff_ms must be 0 to 60000")
        if "retry_on" in sched and (not isinstance(sched["retry_on"], list) or any(k not in FAILURE_KINDS for k in sched["retry_on"])):
            raise bad("retry_on names failure kinds: %s" % FAILURE_KINDS)
        out = {"qualified_name": name, "contract_version": ver, "implementation": im["name"], "implementation_fingerprint": im["fingerprint"],
               "input_type": it, "authority_requirements": ars, "possible_effects": effects,
               "protocol_preconditions": b.get("protocol_preconditions") or [], "approval_requirement": appr,
               "idempotency_contract": idem, "scheduling_contract": sched}
        if b.get("output_type") is not None:
            out["output_type"] = b["output_type"]
        if b.get("protocol_outcomes") is not None:
            out["protocol_outcomes"] = b["protocol_outcomes"]
        if b.get("destination_account") is not None:
            acct = b["destination_account"]
            if not isinstance(acct, str) or not acct:
                raise bad("destination_account names an account")
            if self.account(self.dest[im["destination"]], acct) is None:
                raise bad("destination_account %s is not an account of %s's destination on this host" % (acct, im["name"]))
            out["destination_account"] = acct
        return out

    @staticmethod
    def account(d, name):
        """The configured account called name of destination d (its own url and
        account when name is empty); None when it has no such account."""
        if not name:
            return {"url": d.get("url", ""), "account": d.get("account", ""),
                    "honours_idempotency_key": bool(d.get("honours_idempotency_key", False))}
        if d.get("url") and d.get("account") == name:
            return {"url": d["url"], "account": name, "honours_idempotency_key": bool(d.get("honours_idempotency_key", False))}
        for a in d.get("accounts") or []:
            if a.get("account") == name:
                return {"url": a.get("url", ""), "account": name, "honours_idempotency_key": bool(a.get("honours_idempotency_key", False))}
        return None

    def destination(self, im, c):
        """Where a contract's operations go: the account it names, or the
        destination's own url and account."""
        return self.account(self.dest[im["destination"]], (c or {}).get("destination_account")) or {}

    def h_register(self, rq):
        self.require(rq.headers, "operator", self.keys.get("operator_key"))
        ct = self.normalize_contract(rq.json())
        fp = canon.digest(ct)[0]
        status = 201
        with self.store.tx() as c:
            row = c.execute("SELECT version, fp FROM contracts WHERE name=?", (ct["qualified_name"],)).fetchone()
            if row is not None and row["fp"] == fp:
                status = 200
            else:
                if row is not None and row["version"] == ct["contract_version"]:
                    raise Abort(deny(409, "contract_conflict", "proposal_mismatch", 0, "this version is registered with other content"))
                if row is not None:
                    self.check_compatibility(row["version"], json.loads(c.execute("SELECT doc FROM contracts WHERE name=?", (ct["qualified_name"],)).fetchone()["doc"]), ct)
                old = c.execute("SELECT fp FROM contract_history WHERE name=? AND version=?", (ct["qualified_name"], ct["contract_version"])).fetchone()
                if old is not None and old["fp"] != fp:
                    raise Abort(deny(409, "contract_conflict", "proposal_mismatch", 0, "this version was registered before with other content"))
                c.execute("INSERT INTO contracts(name, version, fp, doc) VALUES(?,?,?,?) ON CONFLICT(name) DO UPDATE SET version=excluded.version, fp=excluded.fp, doc=excluded.doc",
                          (ct["qualified_name"], ct["contract_version"], fp, jdump(ct)))
                c.execute("INSERT OR IGNORE INTO contract_history VALUES(?,?,?)", (ct["qualified_name"], ct["contract_version"], fp))
                self.audit(c, {"event": "contract_registered", "qualified_name": ct["qualified_name"], "contract_fingerprint": fp})
        return status, self.registration(ct, fp)

    @staticmethod
    def interface_changes(old, new):
        """The exported-interface changes from old to new (binding section 12): what a
        caller or approver relies on. Fewer effects, scheduling and output type are not."""
        out = ["adds effect " + e for e in new["possible_effects"] if e not in old["possible_effects"]]
        auth = lambda c: sorted("%s at %s" % (a["kind"], a.get("select", "")) for a in c["authority_requirements"])
        out += ["adds authority requirement " + a for a in auth(new) if a not in auth(old)]
        out += ["drops authority requirement " + a for a in auth(old) if a not in auth(new)]
        pre = lambda c: sorted("%s in %s" % (p.get("argument"), p.get("state")) for p in c["protocol_preconditions"])
        if pre(old) != pre(new):
            out.append("changes protocol preconditions")
        if old.get("protocol_outcomes") != new.get("protocol_outcomes"):
            out.append("changes protocol outcome states")
        for member, what in (("approval_requirement", "the approval requirement"), ("idempotency_contract", "the idempotency contract"),
                             ("implementation", "the implementation"), ("input_type", "the input type approvals bind")):
            if json.dumps(old.get(member), sort_keys=True) != json.dumps(new.get(member), sort_keys=True):
                out.append("changes " + what)
        return out

    def check_compatibility(self, registered, old, ct):
        """An incompatible interface change keeps the major version (the part before the first dot) only by refusal."""
        if registered.split(".")[0] != ct["contract_version"].split(".")[0]:
            return
        changes = self.interface_changes(old, ct)
        if changes:
            d = deny(409, "incompatible_contract_change", "proposal_mismatch", 0,
                     "%s %s %s; an incompatible interface change needs a new major version (registered: %s)"
                     % (ct["qualified_name"], ct["contract_version"], ", ".join(changes), registered),
                     detail={"registered_version": registered, "changes": changes})
            raise Abort(d)

    @staticmethod
    def registration(ct, fp):
        return {"qualified_name": ct["qualified_name"], "contract_version": ct["contract_version"], "contract_fingerprint": fp,
                "implementation_fingerprint": ct["implementation_fingerprint"], "contract": ct}

    def h_get_contract(self, rq, name):
        c = self.contract(name)
        if c is None:
            raise deny(404, "unknown_operation", "schema_error", 0, "no contract named %s" % name)
        fp = c.pop("_fp")
        return 200, self.registration(c, fp)

    def h_put_agent(self, rq, aid):
        self.require(rq.headers, "operator", self.keys.get("operator_key"))
        b = strict(rq.json(), ("principal", "tools", "effect_ceiling"), ("principal",))
        tools, ceiling = b.get("tools") or [], b.get("effect_ceiling") or []
        with self.store.tx() as c:
            c.execute("INSERT INTO agents VALUES(?,?,?,?) ON CONFLICT(id) DO UPDATE SET principal=excluded.principal, tools=excluded.tools, ceiling=excluded.ceiling",
                      (aid, b["principal"], json.dumps(tools), json.dumps(ceiling)))
            self.audit(c, {"event": "agent_configured", "agent_id": aid, "principal": b["principal"]})
        return 200, {"agent_id": aid, "principal": b["principal"], "tools": tools, "effect_ceiling": ceiling}

    def h_get_agent(self, rq, aid):
        a = self.store.one("SELECT * FROM agents WHERE id=?", aid)
        if a is None:
            raise deny(404, "not_found", "request", 0, "no such agent")
        return 200, {"agent_id": aid, "principal": a["principal"], "tools": json.loads(a["tools"]), "effect_ceiling": json.loads(a["ceiling"])}

    # -- grants --------------------------------------------------------------------

    def grant_from(self, b):
        strict(b, ("subject", "operations", "resources", "not_before", "expires_at", "ttl_seconds", "max_uses"))
        if not b.get("subject") or not b.get("operations"):
            raise deny(422, "schema_error", "schema_error", 0, "subject and operations are required")
        res = b.get("resources") or []
        for s in res:
            if not isinstance(s, dict) or not s.get("kind") or not s.get("ids"):
                raise deny(422, "schema_error", "schema_error", 0, "each resource scope needs a kind and ids")
        now = self.now()
        try:
            nb = parse_time(b["not_before"]) if b.get("not_before") else now
            if b.get("expires_at"):
                ex = parse_time(b["expires_at"])
            elif b.get("ttl_seconds"):
                ex = now + int(b["ttl_seconds"]) * 1000
            else:
                raise deny(422, "schema_error", "schema_error", 0, "expires_at or ttl_seconds is required")
        except ValueError as e:
            raise deny(422, "schema_error", "schema_error", 0, "bad time: %s" % e)
        if ex <= nb:
            raise deny(422, "schema_error", "schema_error", 0, "expires_at must follow not_before")
        return {"subject": b["subject"], "operations": b["operations"], "resources": res, "not_before": nb, "expires_at": ex,
                "max_uses": delegation.max_uses_from(b, deny)}

    def insert_grant(self, c, g):
        tok = token("agt_")
        c.execute("INSERT INTO grants(id, token_hash, issuer, subject, operations, resources, not_before, expires_at, parent_id, max_uses)"
                  " VALUES(?,?,?,?,?,?,?,?,?,?)",
                  (g["id"], thash(tok), g["issuer"], g["subject"], json.dumps(g["operations"]), json.dumps(g["resources"]),
                   g["not_before"], g["expires_at"], g.get("parent_id"), g.get("max_uses")))
        self.audit(c, {"event": "grant_issued", "grant_id": g["id"], "principal": g["subject"], "detail": "issuer " + g["issuer"]})
        return tok

    def h_issue_grant(self, rq):
        self.require(rq.headers, "authority", self.keys.get("authority_key"))
        g = self.grant_from(rq.json())
        g["id"], g["issuer"] = new_id("grant_"), self.issuer
        with self.store.tx() as c:
            tok = self.insert_grant(c, g)
            v = self.grant_view(c.execute("SELECT * FROM grants WHERE id=?", (g["id"],)).fetchone())
        v["grant_token"] = tok
        return 201, v

    def h_get_grant(self, rq, gid):
        self.require(rq.headers, "authority", self.keys.get("authority_key"), self.keys.get("operator_key"))
        g = self.grant_by_id(gid)
        if g is None:
            raise deny(404, "not_found", "request", 0, "no such grant")
        v = self.grant_view(g)
        if g["max_uses"] is not None:
            v["uses"] = delegation.used(self.store.conn(), g["id"])
        return 200, v

    def h_revoke_grant(self, rq, gid):
        self.require(rq.headers, "authority", self.keys.get("authority_key"))
        with self.store.tx() as c:
            n = c.execute("UPDATE grants SET revoked_at=? WHERE id=? AND revoked_at IS NULL", (self.now(), gid)).rowcount
            if n:
                self.audit(c, {"event": "grant_revoked", "grant_id": gid})
            g = c.execute("SELECT * FROM grants WHERE id=?", (gid,)).fetchone()
        if g is None:
            raise deny(404, "not_found", "request", 0, "no such grant")
        return 200, self.grant_view(g)

    def h_delegate(self, rq, gid):
        tok = self.bearer(rq.headers)
        if not tok:
            raise deny(401, "unauthenticated", "authorization_denied", 0, "a delegation needs the parent grant's token")
        b = rq.json()
        parent = self.grant_by_token(tok)
        if parent is None or parent["id"] != gid:
            raise deny(403, "wrong_credentials", "authorization_denied", 0, "the bearer token is not this grant's token")
        self.check_chain(parent, 0)
        if isinstance(b, dict) and not b.get("expires_at") and not b.get("ttl_seconds"):
            b = dict(b, expires_at=ts(parent["expires_at"]))
        child = self.grant_from(b)
        if not (isinstance(b, dict) and b.get("not_before")) and child["not_before"] < parent["not_before"]:
            child["not_before"] = parent["not_before"]
        delegation.attenuate(self, parent, child, deny)
        child.update(id=new_id("grant_"), issuer=parent["subject"], parent_id=parent["id"])
        with self.store.tx() as c:
            ctok = self.insert_grant(c, child)
            v = self.grant_view(c.execute("SELECT * FROM grants WHERE id=?", (child["id"],)).fetchone())
        v["grant_token"] = ctok
        return 201, v

    # -- drafts -------------------------------------------------------------------

    def draft_payload(self, raw):
        try:
            m = typespec.materialize(DRAFT_TYPE, raw, "/payload", None)
        except typespec.TypeError_ as e:
            raise deny(422, "schema_error", "schema_error", 0, str(e))
        return m, canon.digest(m)[0]

    def h_create_draft(self, rq):
        b = strict(rq.json(), ("owner", "payload"), ("owner", "payload"))
        if not b["owner"]:
            raise deny(422, "schema_error", "schema_error", 0, "owner is required")
        m, dg = self.draft_payload(b["payload"])
        rid, handle = new_id("res_"), token("hdl_")
        with self.store.tx() as c:
            c.execute("INSERT INTO resources VALUES(?,?,?,1,'Draft',NULL)", (rid, "email_draft", b["owner"]))
            c.execute("INSERT INTO revisions VALUES(?,1,?,?,?)", (rid, jdump(m), dg, handle))
            self.audit(c, {"event": "resource_created", "resource_id": rid, "resource_revision": 1, "resource_state": "Draft", "principal": b["owner"]})
            r = self.resource(rid, c)
        return 201, self.resource_view(r)

    def h_edit_draft(self, rq, rid):
        b = strict(rq.json(), ("owner", "expected_revision", "payload"), ("owner", "payload"))
        m, dg = self.draft_payload(b["payload"])
        self.meet("edit", rid)
        with self.store.tx() as c:
            cur = self.resource(rid, c)
            if cur is None:
                raise Abort(deny(404, "not_found", "request", 0, "no such resource"))
            if cur["owner"] != b["owner"]:
                raise Abort(deny(403, "not_resource_owner", "authorization_denied", 0, "another principal's resource"))
            if b.get("expected_revision") != cur["revision"]:
                raise Abort(deny(409, "stale_revision", "stale_revision", 0, "the resource is at revision %d" % cur["revision"]))
            if cur["state"] not in ("Draft", "Proposed", "Authorized", "Denied"):
                raise Abort(deny(409, "invalid_protocol_state", "invalid_protocol_state", 0, "a %s resource cannot be edited" % cur["state"]))
            rev = cur["revision"] + 1
            c.execute("UPDATE resources SET revision=?, state='Draft' WHERE id=? AND revision=?", (rev, rid, cur["revision"]))
            c.execute("INSERT INTO revisions VALUES(?,?,?,?,?)", (rid, rev, jdump(m), dg, token("hdl_")))
            c.execute("UPDATE requests SET status='invalidated', decided_at=? WHERE status='pending' AND proposal_id IN (SELECT id FROM proposals WHERE resource_id=? AND revision<?)",
                      (self.now(), rid, rev))
            self.audit(c, {"event": "resource_revised", "resource_id": rid, "resource_revision": rev, "resource_state": "Draft", "principal": b["owner"]})
            r = self.resource(rid, c)
        return 200, self.resource_view(r)

    def h_get_resource(self, rq, rid):
        r = self.resource(rid)
        if r is None:
            raise deny(404, "not_found", "request", 0, "no such resource")
        return 200, self.resource_view(r)

    # -- proposals, approvals, permits ---------------------------------------------

    ACTION_MEMBERS = ("execution_id", "principal", "agent_id", "operation", "arguments", "grant_token")

    def h_propose(self, rq):
        req = strict(rq.json(), self.ACTION_MEMBERS)
        ev = self.evaluate(req, True)
        self.meet("propose", self.ev_resource(ev))
        with self.store.tx() as c:
            p = self.insert_proposal(c, ev, req, "Pending")
            if p["resource_id"]:
                n = c.execute("UPDATE resources SET state='Proposed' WHERE id=? AND revision=? AND state='Draft'", (p["resource_id"], p["revision"])).rowcount
                if n != 1:
                    raise Abort(deny(409, "stale_revision", "stale_revision", 7, "the resource changed while the proposal was made"))
            self.audit(c, self.op_audit("proposed", p, resource_state="Proposed" if p["resource_id"] else None))
        return 201, self.proposal_view(p)

    def h_get_proposal(self, rq, pid):
        p = self.proposal(pid)
        if p is None:
            raise deny(404, "not_found", "request", 0, "no such proposal")
        return 200, self.proposal_view(p)

    def request_view(self, a, p=None):
        v = {"request_id": a["id"], "proposal_id": a["proposal_id"], "role": a["role"], "status": a["status"], "ttl_seconds": a["ttl"],
             "approver": a["approver"], "reason": a["reason"], "decided_at": ts(a["decided_at"]), "created_at": ts(a["created_at"])}
        if p is not None:
            v["proposal"] = self.proposal_view(p)
        return v

    def h_request_approval(self, rq, pid):
        b = strict(rq.json(), ("role", "ttl_seconds"))
        p = self.proposal(pid)
        if p is None:
            raise deny(404, "not_found", "request", 0, "no such proposal")
        ct = self.contract(p["operation"])
        need = (ct or {}).get("approval_requirement", {}).get("role") or "operator"
        role = b.get("role") or need
        if role != need:
            raise deny(422, "schema_error", "schema_error", 0, "%s needs approval by role %s" % (p["operation"], need))
        ttl = b.get("ttl_seconds")
        if not isinstance(ttl, int) or isinstance(ttl, bool) or not 1 <= ttl <= self.max_ttl:
            raise deny(422, "schema_error", "schema_error", 0, "ttl_seconds must be 1 to %d" % self.max_ttl)
        rid = new_id("apr_")
        with self.store.tx() as c:
            o = self.operation(p["operation_id"], c)
            if o is None or o["state"] != "Pending":
                raise Abort(deny(409, "invalid_protocol_state", "invalid_protocol_state", 0, "approval is requested only before dispatch"))
            if p["resource_id"]:
                r = c.execute("SELECT revision, state FROM resources WHERE id=?", (p["resource_id"],)).fetchone()
                if r["revision"] != p["revision"]:
                    raise Abort(deny(409, "stale_revision", "stale_revision", 0, "the resource moved on; propose again"))
                if r["state"] != "Proposed":
                    raise Abort(deny(409, "invalid_protocol_state", "invalid_protocol_state", 0, "the resource is %s" % r["state"]))
            c.execute("INSERT INTO requests(id, proposal_id, role, ttl, status, created_at) VALUES(?,?,?,?,'pending',?)", (rid, pid, role, ttl, self.now()))
            self.audit(c, self.op_audit("approval_requested", p, detail="role " + role))
            a = c.execute("SELECT * FROM requests WHERE id=?", (rid,)).fetchone()
        return 201, self.request_view(a, p)

    def h_get_request(self, rq, rid):
        a = self.store.one("SELECT * FROM requests WHERE id=?", rid)
        if a is None:
            raise deny(404, "not_found", "request", 0, "no such approval request")
        return 200, self.request_view(a, self.proposal(a["proposal_id"]))

    def h_decide(self, rq, rid):
        try:
            self.require(rq.headers, "resolver", self.keys.get("resolver_key"))
        except Denial as d:
            d.code = "unauthenticated_decision"
            raise d
        b = strict(rq.json(), ("approver", "role", "decision", "reason", "digest"))
        if not b.get("approver") or b.get("decision") not in ("granted", "denied"):
            raise deny(422, "schema_error", "schema_error", 0, "approver and decision (granted or denied) are required")
        now = self.now()
        permit = None
        with self.store.tx() as c:
            a = c.execute("SELECT * FROM requests WHERE id=?", (rid,)).fetchone()
            if a is None:
                raise Abort(deny(404, "not_found", "request", 0, "no such approval request"))
            p = self.proposal(a["proposal_id"], c)
            if a["status"] != "pending":
                raise Abort(deny(409, "request_not_pending", "invalid_protocol_state", 0, "the request is %s" % a["status"]))
            if b.get("role") != a["role"]:
                raise Abort(deny(403, "approver_role_mismatch", "authorization_denied", 0, "the request needs role %s" % a["role"]))
            if b.get("digest") != p["digest"]:
                raise Abort(deny(409, "proposal_mismatch", "proposal_mismatch", 0, "the decision names another digest"))
            state = None
            if p["resource_id"]:
                r = c.execute("SELECT revision, state FROM resources WHERE id=?", (p["resource_id"],)).fetchone()
                if r["revision"] != p["revision"] or r["state"] != "Proposed":
                    raise Abort(deny(409, "stale_revision", "stale_revision", 0, "the resource moved on; the request is void"))
                state = "Authorized" if b["decision"] == "granted" else "Denied"
                c.execute("UPDATE resources SET state=? WHERE id=? AND revision=?", (state, p["resource_id"], p["revision"]))
            c.execute("UPDATE requests SET status=?, approver=?, reason=?, decided_at=? WHERE id=?", (b["decision"], b["approver"], b.get("reason"), now, rid))
            rec = self.op_audit("approval_decided", p, decision=b["decision"], decision_actor=b["approver"], decision_at=ts(now), resource_state=state)
            if b["decision"] == "granted":
                permit = {"id": new_id("permit_"), "token": token("apt_"), "expires": now + a["ttl"] * 1000}
                c.execute("INSERT INTO permits(id, token_hash, proposal_id, request_id, approver, issued_at, expires_at) VALUES(?,?,?,?,?,?,?)",
                          (permit["id"], thash(permit["token"]), p["id"], rid, b["approver"], now, permit["expires"]))
                rec["permit_id"] = permit["id"]
            self.audit(c, rec)
            a = c.execute("SELECT * FROM requests WHERE id=?", (rid,)).fetchone()
        out = self.request_view(a)
        if permit is None:
            return 200, out
        out["permit"] = {"permit_id": permit["id"], "permit_token": permit["token"], "issued_at": ts(now), "expires_at": ts(permit["expires"]),
                         "binds": {"approver": b["approver"], "role": a["role"], "principal": p["principal"], "execution_id": p["execution_id"],
                                   "grant_id": p["grant_id"], "operation": p["operation"], "operation_id": p["operation_id"],
                                   "contract_fingerprint": p["contract_fp"], "implementation_fingerprint": p["impl_fp"],
                                   "policy_fingerprint": p["policy_fp"], "digest": p["digest"], "resource": p["resource_id"], "revision": p["revision"]}}
        return 201, out

    def h_get_permit(self, rq, pid):
        p = self.permit_by_id(pid)
        if p is None:
            raise deny(404, "not_found", "request", 0, "no such permit")
        return 200, self.permit_view(p)

    def h_revoke_permit(self, rq, pid):
        self.require(rq.headers, "resolver", self.keys.get("resolver_key"))
        with self.store.tx() as c:
            n = c.execute("UPDATE permits SET revoked_at=? WHERE id=? AND revoked_at IS NULL", (self.now(), pid)).rowcount
            p = self.permit_by_id(pid, c)
            if p is None:
                raise Abort(deny(404, "not_found", "request", 0, "no such permit"))
            if n:
                self.audit(c, {"event": "permit_revoked", "permit_id": pid, "proposal_id": p["proposal_id"]})
        return 200, self.permit_view(p)

    # -- dispatch ---------------------------------------------------------------

    DISPATCH_MEMBERS = ACTION_MEMBERS + ("permit_token", "context", "scope_id", "decision", "approval")

    def recheck(self, grant_id, permit, step, c=None):
        g = self.grant_by_id(grant_id, c)
        if g is None:
            raise deny(403, "authority_missing", "authorization_denied", step, "the grant is gone")
        self.check_chain(g, step, c)
        if permit is not None:
            p = self.permit_by_id(permit["id"], c)
            if p is None:
                raise deny(403, "unbound_approval", "authorization_denied", step, "the permit is gone")
            if p["revoked_at"] is not None:
                raise deny(403, "permit_revoked", "approval_expired_or_revoked", step, "the permit was revoked")
            if self.now() >= p["expires_at"]:
                raise deny(403, "permit_expired", "approval_expired_or_revoked", step, "the permit expired")

    def h_dispatch(self, rq):
        req = strict(rq.json(), self.DISPATCH_MEMBERS)
        ctxt = req.get("context") or {}
        strict(ctxt, ("race",))
        f = Flight()
        try:
            return 200, self.dispatch(req, f)
        except Denial as d:
            self.audit_denial(req, d)
            raise
        finally:
            f.decide(False)
            self.land(f)

    def audit_denial(self, req, d):
        try:
            with self.store.tx() as c:
                self.audit(c, {"event": "dispatch_denied", "execution_id": req.get("execution_id"), "qualified_name": req.get("operation"),
                               "principal": req.get("principal"), "agent_id": req.get("agent_id"), "policy_fingerprint": self.policy_fp,
                               "denial_code": d.code, "denial_step": d.step})
        except Exception:  # noqa: BLE001
            pass

    def land(self, f):
        if f.op_id:
            with self.flock:
                if self.flights.get(f.op_id) is f:
                    del self.flights[f.op_id]

    def track(self, f, op_id):
        f.op_id = op_id
        with self.flock:
            self.flights[op_id] = f

    def dispatch(self, req, f):
        if req.get("decision") is not None or req.get("approval") is not None:
            raise deny(403, "unauthenticated_decision", "authorization_denied", 5, "a permit is minted by the resolver, never sent in a dispatch")
        permit = prop = None
        if req.get("permit_token"):
            permit = self.permit_by_token(req["permit_token"])
            if permit is not None:
                prop = self.proposal(permit["proposal_id"])
        ev = self.evaluate(req, False, permit)
        c = ev["contract"]
        if prop is not None and (prop["contract_fp"] != c["_fp"] or prop["impl_fp"] != c["implementation_fingerprint"]):
            raise deny(409, "contract_fingerprint_mismatch", "proposal_mismatch", 1, "the permit was issued under another contract")
        if (req.get("context") or {}).get("race") and "external_write" in c["possible_effects"]:
            raise deny(403, "unsupported_protected_race", "authorization_denied", 4, "no protected write inside a race")
        if c["approval_requirement"].get("required") or req.get("permit_token"):
            now = self.now()
            if not req.get("permit_token") or permit is None:
                raise deny(403, "unbound_approval", "authorization_denied", 5, "no permit the resolver minted was presented")
            if permit["revoked_at"] is not None:
                raise deny(403, "permit_revoked", "approval_expired_or_revoked", 5, "the permit was revoked")
            if now >= permit["expires_at"]:
                raise deny(403, "permit_expired", "approval_expired_or_revoked", 5, "the permit expired")
            if permit["consumed_at"] is not None:
                raise self.consumed_denial(permit, 5)
            if prop["policy_fp"] != self.policy_fp:
                raise deny(403, "policy_fingerprint_mismatch", "proposal_mismatch", 5, "the permit was issued under another deployment policy")
            if prop["digest"] != ev["digest"]:
                approved = canon.parse(prop["snapshot"])
                raise deny(403, "proposal_mismatch", "proposal_mismatch", 5, "the action differs from the approved snapshot",
                           {"approved_digest": prop["digest"], "presented_digest": ev["digest"], "differs": differs(approved, ev["snapshot"])})
        if prop is not None:
            self.track(f, prop["operation_id"])
        chain = self.scope_chain(req["execution_id"], req.get("scope_id"))
        dest = self.destination(ev["impl"], ev["contract"])
        gate = self.gates.get((dest.get("account", ""), dest.get("url", "")))
        self.admit(f, chain, gate)
        try:
            try:
                self.recheck(ev["grant"]["id"], permit, 6)
                self.meet("claim", self.ev_resource(ev))
                op_id = self.claim(f, req, ev, permit, prop, chain)
            finally:
                self.release_budget(chain)
            f.decide(True)
            if f.op_id is None:
                self.track(f, op_id)
            return self.execute(f, ev, op_id, permit)
        finally:
            self.release_slot(gate)

    def claim(self, f, req, ev, permit, prop, chain):
        c_ = ev["contract"]
        try:
            with self.store.tx() as c:
                now = self.now()
                if prop is None:
                    prop = self.insert_proposal(c, ev, req, None)
                    c.execute("INSERT INTO operations(id, execution_id, proposal_id, operation, principal, agent_id, digest, state, attempt, owner, created_at, updated_at) VALUES(?,?,?,?,?,?,?,'Claimed',1,?,?,?)",
                              (prop["operation_id"], req["execution_id"], prop["id"], req["operation"], req["principal"], req["agent_id"], ev["digest"], self.instance, now, now))
                try:
                    self.recheck(ev["grant"]["id"], permit, 7, c)
                except Denial as d:
                    raise Abort(d)
                delegation.charge(c, self, ev["grant"], prop["operation_id"], now)
                row = c.execute("SELECT fp FROM contracts WHERE name=?", (c_["qualified_name"],)).fetchone()
                if row is None or row["fp"] != c_["_fp"]:
                    raise Abort(deny(409, "contract_fingerprint_mismatch", "proposal_mismatch", 7, "the contract was registered anew during dispatch"))
                ag = c.execute("SELECT * FROM agents WHERE id=?", (req["agent_id"],)).fetchone()
                if ag is None or ag["principal"] != req["principal"] or req["operation"] not in json.loads(ag["tools"]):
                    raise Abort(deny(403, "tool_not_in_toolset", "authorization_denied", 7, "the agent lost the tool during dispatch"))
                if permit is not None:
                    n = c.execute("UPDATE permits SET consumed_at=?, consumed_by=? WHERE id=? AND consumed_at IS NULL AND revoked_at IS NULL AND expires_at>?",
                                  (now, prop["operation_id"], permit["id"], now)).rowcount
                    if n != 1:
                        raise Abort(self.consumed_denial(self.permit_by_id(permit["id"], c), 7, c))
                    n = c.execute("UPDATE operations SET state='Claimed', permit_id=?, attempt=1, owner=?, updated_at=? WHERE id=? AND state='Pending'",
                                  (permit["id"], self.instance, now, prop["operation_id"])).rowcount
                    if n != 1:
                        raise Abort(deny(409, "permit_consumed", "permit_claimed", 7, "the operation was already claimed"))
                res_state = None
                for pc in c_.get("protocol_preconditions", []):
                    h = ev["handles"][pc["argument"]]
                    n = c.execute("UPDATE resources SET state='Dispatching', last_operation=? WHERE id=? AND revision=? AND state=?",
                                  (prop["operation_id"], h["resource_id"], h["revision"], pc["state"])).rowcount
                    if n != 1:
                        cur = c.execute("SELECT revision, state FROM resources WHERE id=?", (h["resource_id"],)).fetchone()
                        if cur["revision"] != h["revision"]:
                            raise Abort(deny(409, "stale_revision", "stale_revision", 7, "the resource moved to another revision"))
                        raise Abort(deny(409, "invalid_protocol_state", "invalid_protocol_state", 7, "the resource is %s" % cur["state"]))
                    res_state = "Dispatching"
                for sid in chain:
                    n = c.execute("UPDATE scopes SET used=used+1 WHERE id=? AND used < tool_calls", (sid,)).rowcount
                    if n != 1:
                        raise Abort(deny(403, "budget_exhausted", "capacity", 7, "the budget was spent meanwhile", {"scope_id": sid}))
                self.audit(c, self.op_audit("claimed", prop, permit, claim=ts(now), attempt=1, resource_state=res_state,
                                            field_digests=self.field_digests(ev["snapshot"]["arguments"])))
                if self.fire("claim", req["operation"], f) == "fail":
                    raise Abort(deny(500, "persistence_failure", "persistence_failure", 7,
                                     "the claim and intent could not be persisted, so nothing was dispatched", {"effect": "none"}))
                if f.is_cancelled():
                    raise Abort(deny(409, "cancelled", "cancelled", 7, "cancelled before the claim committed", {"operation_id": prop["operation_id"]}))
                return prop["operation_id"]
        except Abort as a:
            raise a.denial

    def execute(self, f, ev, op_id, permit):
        o = self.operation(op_id)
        p = self.proposal(o["proposal_id"])
        c = ev["contract"]
        im = ev["impl"]
        args = canon.parse(p["snapshot"])["arguments"]
        dest = self.destination(im, c)
        sc = c["scheduling_contract"]
        attempt = 1
        while True:
            res = self.invoke(im, dest, self.timeout_of(c), op_id, c["qualified_name"], args, {
                "execution_id": p["execution_id"], "principal": p["principal"], "agent_id": p["agent_id"], "grant_id": ev["grant"]["id"],
                "permit_id": permit["id"] if permit else None, "proposal_id": p["id"], "snapshot_digest": p["digest"], "attempt": attempt}, f)
            if res["kind"] == "abandoned":
                raise deny(503, "host_stopping", "persistence_failure", 8, "the host stopped; recovery will settle the operation",
                           {"operation_id": op_id, "effect": "unknown"})
            if res["kind"] == "success" and c.get("output_type"):
                try:
                    typespec.materialize(c["output_type"], res.get("output", {}), "/output", None)
                except typespec.TypeError_ as e:
                    res = {"kind": "uncertain", "failure": "unreadable_receipt", "reason": "receipt failed the output type: %s" % e}
            if im["read"] and res["kind"] == "uncertain":
                res["kind"] = "no_effect"
            if res["kind"] != "uncertain" or res.get("failure") == "cancelled":
                break
            if c["idempotency_contract"]["kind"] != "destination_key" or not dest.get("honours_idempotency_key"):
                break
            if attempt >= sc["max_attempts"]:
                res["reason"] += "; no retry: all attempts made"
                break
            if "retry_on" in sc and res.get("failure") not in sc["retry_on"]:
                res["reason"] += "; no retry: the retry selector does not name " + str(res.get("failure"))
                break
            end = time.time() + sc.get("backoff_ms", 0) / 1000.0
            while time.time() < end and not f.is_cancelled() and not self.stop.is_set():
                time.sleep(0.01)
            if f.is_cancelled():
                res["failure"], res["reason"] = "cancelled", res["reason"] + "; no retry: cancelled"
                break
            try:
                self.recheck(ev["grant"]["id"], permit, 8)
            except Denial as d:
                res["reason"] += "; no retry: " + d.code
                break
            attempt += 1
            with self.store.tx() as tx:
                tx.execute("UPDATE operations SET attempt=?, updated_at=? WHERE id=? AND state='Claimed'", (attempt, self.now(), op_id))
                self.audit(tx, self.op_audit("retry", p, permit, attempt=attempt, detail="the destination deduplicates by key"))
        state = {"success": "Completed", "no_effect": "FailedNoEffect", "uncertain": "Unknown"}[res["kind"]]
        try:
            self.persist_outcome(c, p, permit, op_id, state, res, attempt, True)
        except Exception as e:  # noqa: BLE001
            log("outcome not persisted (%s); recording Unknown" % e)
            res = {"kind": "uncertain", "reason": "the outcome could not be persisted after the call"}
            try:
                self.persist_outcome(c, p, permit, op_id, "Unknown", res, attempt, False)
            except Exception:  # noqa: BLE001
                raise deny(500, "persistence_failure", "persistence_failure", 9, "the outcome could not be persisted",
                           {"operation_id": op_id, "effect": "unknown"})
        return self.op_view(self.operation(op_id))

    def persist_outcome(self, c, p, permit, op_id, state, res, attempt, faultable):
        with self.store.tx() as tx:
            n = tx.execute("UPDATE operations SET state=?, outcome=?, attempt=?, updated_at=? WHERE id=? AND state='Claimed'",
                           (state, jdump(res), attempt, self.now(), op_id)).rowcount
            if n != 1:
                return
            rs = None
            if p["resource_id"] and c.get("protocol_outcomes"):
                rs = {"Completed": c["protocol_outcomes"]["success"], "FailedNoEffect": c["protocol_outcomes"]["no_effect"],
                      "Unknown": c["protocol_outcomes"]["uncertain"]}[state]
                tx.execute("UPDATE resources SET state=? WHERE id=? AND state='Dispatching' AND last_operation=?", (rs, p["resource_id"], op_id))
            self.audit(tx, self.op_audit("outcome", p, permit, attempt=attempt, outcome=state, resource_state=rs, detail=res.get("reason")))
            if faultable and self.fire("completion", p["operation"]) == "fail":
                raise RuntimeError("injected: the outcome transaction fails")

    def timeout_of(self, c):
        """The handler's deadline in ms: the host's, or the contract's
        scheduling_contract.timeout_ms when that is shorter."""
        t = int((c or {}).get("scheduling_contract", {}).get("timeout_ms") or 0)
        return min(self.handler_timeout, t) if t > 0 else self.handler_timeout

    def invoke(self, im, d, timeout_ms, op_id, qname, args, context, f):
        url = urllib.parse.urlsplit(d.get("url", ""))
        if not url.hostname:
            return {"kind": "no_effect", "reason": "no destination configured"}
        if f.is_cancelled():
            return {"kind": "no_effect", "failure": "cancelled", "reason": "cancelled before the call was made"}
        conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=timeout_ms / 1000.0)
        with f.lock:
            f.conn = conn
        try:
            if im["read"]:
                path = url.path.rstrip("/") + "/lookup?key=" + urllib.parse.quote(str(args.get("message_key", "")), safe="")
                return self.read_call(conn, path, f)
            fault = self.fire("external_call", qname, f)
            if self.stop.is_set():
                return {"kind": "abandoned"}
            if f.is_cancelled():
                return {"kind": "no_effect", "failure": "cancelled", "reason": "cancelled before the call was made"}
            body = jdump({"operation_id": op_id, "operation": qname, "account": d.get("account", ""), "payload": args, "context": context}).encode()
            headers = {"Content-Type": "application/json", "Idempotency-Key": op_id, "X-AGL-Operation-Id": op_id, "X-AGL-Attempt": str(context["attempt"])}
            try:
                conn.connect()
            except OSError as e:
                return {"kind": "no_effect", "reason": "destination unreachable: %s" % e}
            try:
                conn.request("POST", url.path.rstrip("/") + "/send", body=body, headers=headers)
                if fault == "fail":
                    conn.close()
                    return {"kind": "uncertain", "failure": "connection_lost", "reason": "connection lost after sending (injected)"}
                resp = conn.getresponse()
                raw = resp.read(1 << 20)
            except socket.timeout:
                if f.is_cancelled():
                    return {"kind": "uncertain", "failure": "cancelled", "reason": "cancelled while the call was in flight"}
                return {"kind": "uncertain", "failure": "timeout", "reason": "destination timed out"}
            except (OSError, http.client.HTTPException) as e:
                if f.is_cancelled():
                    return {"kind": "uncertain", "failure": "cancelled", "reason": "cancelled while the call was in flight"}
                return {"kind": "uncertain", "failure": "connection_lost", "reason": "transport error after sending: %s" % e}
            st = resp.status
            if 200 <= st < 300:
                try:
                    rc = canon.parse(raw)
                    mid = rc.get("message_id") if isinstance(rc, dict) else None
                except canon.CanonError:
                    mid = None
                if not isinstance(mid, str) or not mid:
                    return {"kind": "uncertain", "failure": "unreadable_receipt", "destination_status": st, "reason": "unreadable receipt"}
                return {"kind": "success", "destination_status": st, "destination_duplicate": bool(rc.get("duplicate", False)), "output": {"message_id": mid}}
            if 400 <= st < 500 and st not in (408, 429):
                return {"kind": "no_effect", "destination_status": st, "reason": "the destination rejected the message"}
            return {"kind": "uncertain", "failure": "destination_error", "destination_status": st, "reason": "destination answered %d" % st}
        finally:
            with f.lock:
                f.conn = None
            conn.close()

    def read_call(self, conn, path, f):
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            raw = resp.read(1 << 16)
            lr = canon.parse(raw)
            if resp.status != 200 or not isinstance(lr, dict):
                raise ValueError("unreadable lookup answer")
        except Exception as e:  # noqa: BLE001
            if f.is_cancelled():
                return {"kind": "no_effect", "failure": "cancelled", "reason": "read cancelled"}
            return {"kind": "no_effect", "reason": "read failed: %s" % e}
        out = {"found": bool(lr.get("found"))}
        if lr.get("message_id"):
            out["message_id"] = lr["message_id"]
        return {"kind": "success", "destination_status": 200, "output": out}

    # -- admission and budget scopes --------------------------------------------

    def scope_chain(self, execution_id, scope_id):
        if not scope_id:
            row = self.store.one("SELECT id FROM scopes WHERE execution_id=? AND parent_id IS NULL", execution_id)
            if row is None:
                return []
            scope_id = row["id"]
        chain = []
        while scope_id and len(chain) < 32:
            s = self.store.one("SELECT * FROM scopes WHERE id=?", scope_id)
            if s is None:
                raise deny(422, "unknown_scope", "schema_error", 6, "no budget scope %s" % scope_id)
            if s["execution_id"] != execution_id:
                raise deny(403, "scope_mismatch", "authorization_denied", 6, "the scope belongs to another execution")
            chain.append(s["id"])
            scope_id = s["parent_id"]
        return chain

    def wait_gate(self, f, g):
        """The destination account's own slot, before the host's."""
        with self.adm:
            g["waiting"] += 1
            self.waiting += 1
        end = time.time() + g["wait"] / 1000.0
        got = False
        try:
            while not got and time.time() < end and not f.is_cancelled():
                got = g["slots"].acquire(timeout=0.02)
        finally:
            with self.adm:
                g["waiting"] -= 1
                self.waiting -= 1
        if not got:
            if f.is_cancelled():
                raise deny(409, "cancelled", "cancelled", 6, "cancelled while it waited for capacity", {"operation_id": f.op_id} if f.op_id else None)
            raise deny(429, "capacity_unavailable", "capacity", 6, "destination account %s took no more dispatches in time" % g["account"], retryable=True)
        with self.adm:
            g["in_use"] += 1

    def ungate(self, g):
        if g is not None:
            with self.adm:
                g["in_use"] -= 1
            g["slots"].release()

    def admit(self, f, chain, gate=None):
        if gate is not None:
            self.wait_gate(f, gate)
        try:
            return self.admit_host(f, chain)
        except BaseException:
            self.ungate(gate)
            raise

    def admit_host(self, f, chain):
        with self.adm:
            self.waiting += 1
        end = time.time() + self.admission_wait / 1000.0
        got = False
        try:
            while not got and time.time() < end and not f.is_cancelled():
                got = self.slots.acquire(timeout=0.02)
        finally:
            with self.adm:
                self.waiting -= 1
        if not got:
            if f.is_cancelled():
                raise deny(409, "cancelled", "cancelled", 6, "cancelled while it waited for capacity", {"operation_id": f.op_id} if f.op_id else None)
            raise deny(429, "capacity_unavailable", "capacity", 6, "no capacity became free in time; nothing was claimed", retryable=True)
        with self.adm:
            self.in_use += 1
            for sid in chain:
                s = self.store.one("SELECT * FROM scopes WHERE id=?", sid)
                if s["used"] + self.reserved.get(sid, 0) >= s["tool_calls"]:
                    self.in_use -= 1
                    self.slots.release()
                    raise deny(403, "budget_exhausted", "capacity", 6, "the budget scope has spent its tool calls",
                               {"scope_id": sid, "budget": s["tool_calls"], "used": s["used"]})
            for sid in chain:
                self.reserved[sid] = self.reserved.get(sid, 0) + 1
        return True

    def release_budget(self, chain):
        with self.adm:
            for sid in chain:
                n = self.reserved.get(sid, 0) - 1
                if n > 0:
                    self.reserved[sid] = n
                else:
                    self.reserved.pop(sid, None)
        chain[:] = []

    def release_slot(self, gate=None):
        with self.adm:
            self.in_use -= 1
        self.slots.release()
        self.ungate(gate)

    def scope_view(self, s):
        return {"scope_id": s["id"], "execution_id": s["execution_id"], "parent_scope_id": s["parent_id"],
                "budget": {"tool_calls": s["tool_calls"]}, "used": {"tool_calls": s["used"]}, "created_at": ts(s["created_at"])}

    def budget_of(self, b):
        budget = b.get("budget")
        if not isinstance(budget, dict) or set(budget) - {"tool_calls"} or not isinstance(budget.get("tool_calls"), int) or budget["tool_calls"] < 0:
            raise deny(422, "schema_error", "schema_error", 0, "budget is {tool_calls: n}")
        return budget["tool_calls"]

    def h_create_scope(self, rq):
        self.require(rq.headers, "operator", self.keys.get("operator_key"))
        b = strict(rq.json(), ("execution_id", "budget"), ("execution_id", "budget"))
        n = self.budget_of(b)
        sid = new_id("scope_")
        with self.store.tx() as c:
            if c.execute("SELECT 1 FROM scopes WHERE execution_id=? AND parent_id IS NULL", (b["execution_id"],)).fetchone():
                raise Abort(deny(409, "scope_exists", "request", 0, "the execution already has its budget scope"))
            c.execute("INSERT INTO scopes VALUES(?,?,NULL,?,0,?)", (sid, b["execution_id"], n, self.now()))
            self.audit(c, {"event": "scope_opened", "execution_id": b["execution_id"], "detail": "root scope " + sid})
            s = c.execute("SELECT * FROM scopes WHERE id=?", (sid,)).fetchone()
        return 201, self.scope_view(s)

    def h_child_scope(self, rq, pid):
        b = strict(rq.json(), ("execution_id", "budget"), ("budget",))
        n = self.budget_of(b)
        sid = new_id("scope_")
        with self.store.tx() as c:
            parent = c.execute("SELECT * FROM scopes WHERE id=?", (pid,)).fetchone()
            if parent is None:
                raise Abort(deny(404, "not_found", "request", 0, "no such scope"))
            if b.get("execution_id") and b["execution_id"] != parent["execution_id"]:
                raise Abort(deny(403, "scope_mismatch", "authorization_denied", 0, "the scope belongs to another execution"))
            if n > parent["tool_calls"]:
                raise Abort(deny(403, "budget_exceeds_parent", "capacity", 0, "a child scope has at most its parent's budget",
                                 {"parent_scope_id": pid, "parent_budget": parent["tool_calls"]}))
            c.execute("INSERT INTO scopes VALUES(?,?,?,?,0,?)", (sid, parent["execution_id"], pid, n, self.now()))
            self.audit(c, {"event": "scope_opened", "execution_id": parent["execution_id"], "detail": "child scope %s of %s" % (sid, pid)})
            s = c.execute("SELECT * FROM scopes WHERE id=?", (sid,)).fetchone()
        return 201, self.scope_view(s)

    def h_get_scope(self, rq, sid):
        s = self.store.one("SELECT * FROM scopes WHERE id=?", sid)
        if s is None:
            raise deny(404, "not_found", "request", 0, "no such scope")
        return 200, self.scope_view(s)

    # -- operations, reconciliation, cancellation ---------------------------------

    def h_get_operation(self, rq, oid):
        o = self.operation(oid)
        if o is None:
            raise deny(404, "not_found", "request", 0, "no such operation")
        return 200, self.op_view(o)

    def h_list_operations(self, rq):
        ex = rq.query.get("execution_id", [""])[0]
        if not ex:
            raise deny(422, "schema_error", "schema_error", 0, "execution_id is required")
        rows = self.store.all("SELECT * FROM operations WHERE execution_id=? ORDER BY created_at, id LIMIT 1000", ex)
        return 200, {"operations": [self.op_view(o) for o in rows]}

    def lookup(self, d, key):
        url = urllib.parse.urlsplit(d.get("url", ""))
        conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=self.handler_timeout / 1000.0)
        try:
            conn.request("GET", url.path.rstrip("/") + "/lookup?key=" + urllib.parse.quote(key, safe=""))
            resp = conn.getresponse()
            lr = canon.parse(resp.read(1 << 16))
            if resp.status != 200 or not isinstance(lr, dict):
                raise OSError("lookup answered %d" % resp.status)
            return bool(lr.get("found")), lr.get("message_id")
        finally:
            conn.close()

    def h_reconcile(self, rq, oid):
        b = strict(rq.json(), ("method", "resolution", "actor", "evidence"))
        if b.get("method") == "receiver_lookup":
            self.require(rq.headers, "operator or resolver", self.keys.get("operator_key"), self.keys.get("resolver_key"))
        elif b.get("method") == "human":
            self.require(rq.headers, "resolver", self.keys.get("resolver_key"))
            if not b.get("actor") or b.get("resolution") not in ("completed", "no_effect"):
                raise deny(422, "schema_error", "schema_error", 0, "a human reconciliation needs an actor and a resolution")
        else:
            raise deny(422, "schema_error", "schema_error", 0, "method is receiver_lookup or human")
        o = self.operation(oid)
        if o is None:
            raise deny(404, "not_found", "request", 0, "no such operation")
        if o["state"] != "Unknown":
            raise deny(409, "not_awaiting_reconciliation", "invalid_protocol_state", 0, "the operation is %s" % o["state"])
        recon = {"method": b["method"], "at": ts(self.now())}
        if b["method"] == "receiver_lookup":
            ct = self.contract(o["operation"])
            try:
                found, mid = self.lookup(self.destination(IMPL[ct["implementation"]], ct), o["id"])
            except (OSError, http.client.HTTPException, canon.CanonError) as e:
                raise deny(502, "destination_unreachable", "reconciliation", 0, "the receiver could not be asked: %s" % e, retryable=True)
            resolution = "completed" if found else "no_effect"
            recon["evidence"] = {"found": True, "message_id": mid} if found else {"found": False}
        else:
            resolution = b["resolution"]
            recon["actor"] = b["actor"]
            if b.get("evidence") is not None:
                recon["evidence"] = b["evidence"]
        recon["resolution"] = resolution
        self.settle(o, recon, resolution)
        return 200, self.op_view(self.operation(oid))

    def settle(self, o, recon, resolution):
        state = {"completed": "ReconciledCompleted", "no_effect": "ReconciledNoEffect"}[resolution]
        rstate = {"completed": "Sent", "no_effect": "FailedNoEffect"}[resolution]
        with self.store.tx() as c:
            n = c.execute("UPDATE operations SET state=?, reconciliation=?, updated_at=? WHERE id=? AND state='Unknown'",
                          (state, jdump(recon), self.now(), o["id"])).rowcount
            if n != 1:
                raise Abort(deny(409, "not_awaiting_reconciliation", "invalid_protocol_state", 0, "reconciled concurrently"))
            p = self.proposal(o["proposal_id"], c)
            rs = None
            if p["resource_id"]:
                rs = rstate
                c.execute("UPDATE resources SET state=? WHERE id=? AND state='Unknown' AND last_operation=?", (rstate, p["resource_id"], o["id"]))
            self.audit(c, self.op_audit("reconciled", p, None, permit_id=o["permit_id"], outcome=state, reconciliation=recon,
                                        attempt=o["attempt"], resource_state=rs))

    def h_cancel(self, rq, oid):
        b = strict(rq.json(), ("grant_token",), ("grant_token",))
        o = self.operation(oid)
        if o is None:
            raise deny(404, "not_found", "request", 0, "no such operation")
        g = self.grant_by_token(b["grant_token"] or "")
        if g is None or g["subject"] != o["principal"]:
            raise deny(403, "authority_missing", "authorization_denied", 0, "only a grant of the operation's principal cancels it")
        with self.flock:
            f = self.flights.get(oid)
        if f is None:
            raise deny(409, "nothing_to_cancel", "request", 0, "no dispatch of this operation is in flight here")
        claimed = f.cancel()
        return 200, {"operation_id": oid, "cancelled": True, "phase": "after_claim" if claimed else "before_claim"}

    # -- parallel branches ---------------------------------------------------------

    def h_parallel(self, rq):
        req = strict(rq.json(), ("mode", "execution_id", "principal", "agent_id", "grant_token", "scope_id", "branches"))
        branches = req.get("branches")
        if req.get("mode") not in ("map", "race") or not isinstance(branches, list) or not 1 <= len(branches) <= 32:
            raise deny(422, "schema_error", "schema_error", 0, "mode is map or race, with 1 to 32 branches")
        seen = {}
        for i, br in enumerate(branches):
            strict(br, ("operation", "arguments", "permit_token"))
            t = br.get("permit_token")
            if t:
                if t in seen:
                    raise deny(403, "permit_shared_across_branches", "authorization_denied", 0,
                               "branches %d and %d present one permit" % (seen[t], i), {"branches": [seen[t], i]})
                seen[t] = i
        if req["mode"] == "race":
            for br in branches:
                ct = self.contract(br.get("operation", ""))
                if ct is not None and "external_write" in ct["possible_effects"]:
                    raise deny(403, "unsupported_protected_race", "authorization_denied", 4, "no protected write inside a race")
        n = len(branches)
        flights = [Flight() for _ in range(n)]
        results = [None] * n
        winner = []
        wl = threading.Lock()

        def run(i):
            br = branches[i]
            dr = {"execution_id": req.get("execution_id"), "principal": req.get("principal"), "agent_id": req.get("agent_id"),
                  "operation": br.get("operation"), "arguments": br.get("arguments"), "grant_token": req.get("grant_token"),
                  "permit_token": br.get("permit_token"), "scope_id": req.get("scope_id"), "context": {"race": req["mode"] == "race"}}
            try:
                v = self.dispatch(dr, flights[i])
                results[i] = {"index": i, "status": 200, "operation": v}
                if req["mode"] == "race" and v["state"] == "Completed":
                    with wl:
                        first = not winner
                        if first:
                            winner.append(i)
                    if first:
                        for j, fl in enumerate(flights):
                            if j != i:
                                threading.Thread(target=fl.cancel, daemon=True).start()
            except Denial as d:
                self.audit_denial(dr, d)
                results[i] = {"index": i, "status": d.status, "error": d.body()["error"]}
            except Exception as e:  # noqa: BLE001
                log("parallel branch failed: %s" % e)
                results[i] = {"index": i, "status": 500, "error": deny(500, "persistence_failure", "persistence_failure", 0,
                                                                        "the branch could not complete").body()["error"]}
            finally:
                flights[i].decide(False)
                self.land(flights[i])

        threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out = {"mode": req["mode"], "results": results}
        if req["mode"] == "race":
            out["winner"] = winner[0] if winner else None
        return 200, out

    # -- legacy entry point and audit -------------------------------------------------

    def h_legacy(self, rq):
        b = strict(rq.json(), ("tool", "arguments"), ("tool",))
        tool = b["tool"]
        if tool in IMPL or self.contract(tool) is not None:
            raise deny(403, "protected_handler", "authorization_denied", 0, "%s is protected: only the dispatcher runs it" % tool)
        if tool not in LEGACY_TOOLS:
            raise deny(404, "unknown_tool", "request", 0, "no legacy tool %s" % tool)
        args = b.get("arguments")
        return 200, {"tool": tool, "result": {} if args is None else args}

    def h_audit(self, rq):
        self.require(rq.headers, "operator", self.keys.get("operator_key"), self.keys.get("resolver_key"))
        q = rq.query
        after = int(q.get("after_seq", ["0"])[0] or 0)
        limit = int(q.get("limit", ["1000"])[0] or 1000)
        limit = 1000 if limit <= 0 or limit > 1000 else limit
        sql, args = "SELECT seq, record FROM audit WHERE seq > ?", [after]
        for k in ("operation_id", "execution_id"):
            if q.get(k, [""])[0]:
                sql += " AND %s = ?" % k
                args.append(q[k][0])
        rows = self.store.all(sql + " ORDER BY seq LIMIT ?", *(args + [limit]))
        out = []
        for r in rows:
            rec = canon.parse(r["record"])
            rec["seq"] = r["seq"]
            out.append(rec)
        return 200, {"records": out}

    # -- recovery and retention ------------------------------------------------------

    def recover(self):
        # A sweep counts as in flight until it has started its resumptions,
        # so that POST recover never takes the gap between this sweep's
        # commit and their start for "decided".
        self.begin_resuming()
        try:
            self.recover_orphans()
        finally:
            self.end_resuming()

    def begin_resuming(self):
        with self.resumed:
            self.resuming += 1

    def end_resuming(self):
        with self.resumed:
            self.resuming -= 1
            self.resumed.notify_all()

    def resume_counted(self, oid):
        try:
            self.resume(oid)
        finally:
            self.end_resuming()

    def recover_orphans(self):
        cutoff = self.now() - self.lease
        recovered = []
        with self.store.tx() as c:
            alive = {r[0] for r in c.execute("SELECT id FROM instances WHERE heartbeat_at >= ?", (cutoff,)).fetchall()}
            dead = {}
            rows = c.execute("SELECT * FROM operations WHERE state='Claimed'").fetchall()
            for o in rows:
                if o["owner"] == self.instance:
                    continue
                if o["owner"] in alive:
                    # Silent for less than the lease: stopped only if its
                    # lock says so.
                    if o["owner"] not in dead:
                        dead[o["owner"]] = self.stopped(o["owner"])
                    if not dead[o["owner"]]:
                        continue
                res = {"kind": "uncertain", "reason": "the host stopped while the operation was claimed"}
                n = c.execute("UPDATE operations SET state='Unknown', outcome=?, updated_at=? WHERE id=? AND state='Claimed'",
                              (jdump(res), self.now(), o["id"])).rowcount
                if n != 1:
                    continue
                recovered.append(o["id"])
                p = self.proposal(o["proposal_id"], c)
                rs = None
                if p["resource_id"]:
                    rs = "Unknown"
                    c.execute("UPDATE resources SET state='Unknown' WHERE id=? AND state='Dispatching' AND last_operation=?", (p["resource_id"], o["id"]))
                self.audit(c, self.op_audit("recovered_unknown", p, None, permit_id=o["permit_id"], attempt=o["attempt"], outcome="Unknown",
                                            resource_state=rs, detail="the claim's host stopped"))
            c.execute("DELETE FROM instances WHERE heartbeat_at < ? AND id <> ?", (cutoff - self.lease, self.instance))
        for oid in recovered:
            self.begin_resuming()
            threading.Thread(target=self.resume_counted, args=(oid,), daemon=True).start()

    @staticmethod
    def same_deployment(bound, dest):
        """Whether the deployment a snapshot bound is where this host sends."""
        if not isinstance(bound, dict):
            return False
        return (bound.get("destination") == dest.get("url") and bound.get("account") == dest.get("account")
                and bool(bound.get("destination_idempotent")) == bool(dest.get("honours_idempotency_key")))

    def resume(self, oid):
        """Settle an operation recovery declared Unknown by sending it again
        under its key, when that is safe and nothing it was approved under
        has changed; otherwise stop and say why."""
        try:
            o = self.operation(oid)
            p = self.proposal(o["proposal_id"])
            ct = self.contract(o["operation"])
            if ct is None:
                return
            im = IMPL.get(ct["implementation"])
            dest = self.destination(im, ct) if im else {}
            if im is None or ct["idempotency_contract"]["kind"] != "destination_key" or not dest.get("honours_idempotency_key") \
                    or o["attempt"] >= ct["scheduling_contract"]["max_attempts"]:
                return
            snap = canon.parse(p["snapshot"])
            code = None
            if p["contract_fp"] != ct["_fp"]:
                code = "contract_fingerprint_mismatch"
            elif p["impl_fp"] != ct["implementation_fingerprint"] or p["impl_fp"] != im["fingerprint"]:
                code = "implementation_fingerprint_mismatch"
            elif p["policy_fp"] != self.policy_fp:
                code = "policy_fingerprint_mismatch"
            elif snap.get("canon_version") != canon.CANON_VERSION:
                code = "canonicalization_mismatch"
            elif not self.same_deployment(snap.get("deployment"), dest):
                # The destination, account or deduplication promise the
                # approval bound is not the one this host would send to.
                code = "proposal_mismatch"
            permit = self.permit_by_id(o["permit_id"]) if o["permit_id"] else None
            if code is None:
                try:
                    self.recheck(p["grant_id"], permit, 8)
                except Denial as d:
                    code = d.code
            if code is not None:
                with self.store.tx() as c:
                    self.audit(c, self.op_audit("recovery_stopped", p, None, permit_id=o["permit_id"], attempt=o["attempt"],
                                                outcome="Unknown", denial_code=code, detail="recovery stopped; the operation waits for reconciliation"))
                return
            attempt = o["attempt"] + 1
            with self.store.tx() as c:
                if c.execute("UPDATE operations SET attempt=?, updated_at=? WHERE id=? AND state='Unknown' AND attempt=?",
                             (attempt, self.now(), oid, o["attempt"])).rowcount != 1:
                    return
                self.audit(c, self.op_audit("retry", p, None, permit_id=o["permit_id"], attempt=attempt, detail="recovery: sending again under the same key"))
            res = self.invoke(im, dest, self.handler_timeout, oid, o["operation"], snap["arguments"], {
                "execution_id": o["execution_id"], "principal": o["principal"], "agent_id": o["agent_id"], "grant_id": p["grant_id"],
                "permit_id": o["permit_id"], "proposal_id": p["id"], "snapshot_digest": p["digest"], "attempt": attempt}, Flight())
            if res["kind"] != "success":
                return
            recon = {"method": "idempotent_retry", "resolution": "completed", "at": ts(self.now()),
                     "evidence": {"message_id": res["output"]["message_id"], "duplicate": res.get("destination_duplicate", False), "attempt": attempt}}
            try:
                self.settle(self.operation(oid), recon, "completed")
            except Abort:
                pass
        except Exception as e:  # noqa: BLE001
            log("resume of %s failed: %s" % (oid, e))

    def sweep_retention(self):
        cutoff = self.now() - self.retention
        out = {"permits": 0, "approval_requests": 0, "intents": 0}
        with self.store.tx() as c:
            out["permits"] = c.execute("DELETE FROM permits WHERE consumed_at IS NULL AND ((revoked_at IS NOT NULL AND revoked_at < ?) OR expires_at < ?)",
                                       (cutoff, cutoff)).rowcount
            out["approval_requests"] = c.execute(
                "DELETE FROM requests WHERE decided_at IS NOT NULL AND decided_at < ? AND (status IN ('denied','invalidated') OR (status='granted' AND id NOT IN (SELECT request_id FROM permits)))",
                (cutoff,)).rowcount
            dead = c.execute("""SELECT o.id FROM operations o JOIN proposals p ON p.id=o.proposal_id WHERE o.state='Pending' AND o.created_at < ?
                AND NOT EXISTS (SELECT 1 FROM permits m WHERE m.proposal_id=p.id) AND NOT EXISTS (SELECT 1 FROM requests a WHERE a.proposal_id=p.id)""",
                             (cutoff,)).fetchall()
            for r in dead:
                c.execute("DELETE FROM proposals WHERE operation_id=?", (r["id"],))
                c.execute("DELETE FROM operations WHERE id=? AND state='Pending'", (r["id"],))
            out["intents"] = len(dead)
            if sum(out.values()):
                self.audit(c, {"event": "retention_swept", "detail": json.dumps(out)})
        return out

    # -- seams ---------------------------------------------------------------------------

    def s_add_fault(self, rq):
        b = strict(rq.json(), ("boundary", "action", "operation", "count", "delay_ms", "exit_code", "fired"), ("boundary", "action"))
        if b["boundary"] not in ("claim", "external_call", "completion") or b["action"] not in ("fail", "exit", "halt", "delay"):
            raise deny(422, "schema_error", "schema_error", 0, "boundary claim|external_call|completion, action fail|exit|halt|delay")
        ft = {"boundary": b["boundary"], "action": b["action"], "operation": b.get("operation", ""), "count": b.get("count") or 1,
              "delay_ms": b.get("delay_ms", 0), "fired": 0}
        if b.get("exit_code"):
            ft["exit_code"] = b["exit_code"]
        with self.flock:
            self.faults.append(ft)
        return 201, ft

    def s_faults(self, rq):
        with self.flock:
            return 200, {"faults": [dict(f) for f in self.faults]}

    def s_clear_faults(self, rq):
        with self.flock:
            self.faults = []
        return 204, None

    def s_admission(self, rq):
        name = rq.query.get("account", [""])[0]
        with self.adm:
            reserved = {k: v for k, v in self.reserved.items() if v > 0}
            if name:
                for g in self.gates.values():
                    if g["account"] == name:
                        return 200, {"account": name, "capacity": g["capacity"], "in_use": g["in_use"], "waiting": g["waiting"], "reserved": reserved}
                raise deny(404, "not_found", "request", 0, "account %s has no admission limit of its own" % name)
            return 200, {"capacity": self.capacity, "in_use": self.in_use, "waiting": self.waiting, "reserved": reserved}

    def s_barrier(self, rq):
        b = strict(rq.json(), ("points", "parties", "timeout_ms", "resource_id"), ("points", "parties"))
        if not b["points"] or any(p not in ("claim", "propose", "edit") for p in b["points"]) or not 2 <= b["parties"] <= 64:
            raise deny(422, "schema_error", "schema_error", 0, "points claim|propose|edit, 2 to 64 parties")
        timeout = b.get("timeout_ms") or 5000
        with self.store.tx() as c:
            c.execute("INSERT INTO barriers VALUES(?,?,?,0,?) ON CONFLICT(id) DO UPDATE SET points=excluded.points, parties=excluded.parties, arrived=0, deadline=excluded.deadline",
                      (self.barrier_id(b.get("resource_id")), json.dumps(b["points"]), b["parties"], int(time.time() * 1000) + timeout))
        out = {"points": b["points"], "parties": b["parties"], "timeout_ms": timeout, "arrived": 0}
        if b.get("resource_id"):
            out["resource_id"] = b["resource_id"]
        return 201, out

    def s_barrier_state(self, rq):
        r = self.store.one("SELECT * FROM barriers WHERE id=?", self.barrier_id(rq.query.get("resource_id", [""])[0]))
        if r is None:
            raise deny(404, "not_found", "request", 0, "no barrier is armed")
        return 200, {"points": json.loads(r["points"]), "parties": r["parties"], "arrived": r["arrived"],
                     "timeout_ms": max(0, r["deadline"] - int(time.time() * 1000))}

    def s_disarm(self, rq):
        with self.store.tx() as c:
            rid = rq.query.get("resource_id", [""])[0]
            if rid:
                c.execute("DELETE FROM barriers WHERE id=?", (self.barrier_id(rid),))
            else:
                c.execute("DELETE FROM barriers")
        return 204, None

    def s_clock(self, rq):
        if rq.method == "POST":
            b = strict(rq.json(), ("advance_ms",), ("advance_ms",))
            if not isinstance(b["advance_ms"], int) or b["advance_ms"] < 0:
                raise deny(422, "schema_error", "schema_error", 0, "the clock only moves forward")
            self.clock_offset += b["advance_ms"]
        return 200, {"now": ts(self.now()), "offset_ms": self.clock_offset}

    def s_retention(self, rq):
        return 200, {"removed": self.sweep_retention(), "retention_ms": self.retention}

    def s_recover(self, rq):
        self.recover()
        # Answer once every resumption in flight (this sweep's or an earlier
        # tick's) has decided, its state and audit records written. A
        # resumption is bounded by the handler's timeout; past that and a
        # margin the seam says it could not wait.
        with self.resumed:
            if not self.resumed.wait_for(lambda: self.resuming == 0 or self.stop.is_set(), timeout=self.handler_timeout / 1000.0 + 30):
                raise deny(503, "recovery_in_flight", "persistence_failure", 0, "a resumption had not decided in time")
        return 200, {"recovered": 0}

    def s_instance(self, rq):
        return 200, {"instance": self.instance, "pid": os.getpid()}

    # -- routing -------------------------------------------------------------------------

    def routes(self):
        p, s = re.escape(PREFIX), re.escape(SEAMS)
        table = [
            ("GET", p + "/", self.h_info), ("GET", p + "/implementations", self.h_implementations),
            ("POST", p + "/contracts", self.h_register), ("GET", p + "/contracts/([^/]+)", self.h_get_contract),
            ("PUT", p + "/agents/([^/]+)", self.h_put_agent), ("GET", p + "/agents/([^/]+)", self.h_get_agent),
            ("POST", p + "/grants", self.h_issue_grant), ("GET", p + "/grants/([^/]+)", self.h_get_grant),
            ("POST", p + "/grants/([^/]+)/delegations", self.h_delegate), ("POST", p + "/grants/([^/]+)/revoke", self.h_revoke_grant),
            ("POST", p + "/resources/email-drafts", self.h_create_draft), ("PUT", p + "/resources/([^/]+)", self.h_edit_draft),
            ("GET", p + "/resources/([^/]+)", self.h_get_resource),
            ("POST", p + "/proposals", self.h_propose), ("GET", p + "/proposals/([^/]+)", self.h_get_proposal),
            ("POST", p + "/proposals/([^/]+)/approval-requests", self.h_request_approval),
            ("GET", p + "/approval-requests/([^/]+)", self.h_get_request), ("POST", p + "/approval-requests/([^/]+)/decision", self.h_decide),
            ("GET", p + "/permits/([^/]+)", self.h_get_permit), ("POST", p + "/permits/([^/]+)/revoke", self.h_revoke_permit),
            ("POST", p + "/dispatch", self.h_dispatch),
            ("GET", p + "/operations", self.h_list_operations), ("GET", p + "/operations/([^/]+)", self.h_get_operation),
            ("POST", p + "/operations/([^/]+)/reconcile", self.h_reconcile), ("POST", p + "/operations/([^/]+)/cancel", self.h_cancel),
            ("GET", p + "/audit", self.h_audit), ("POST", p + "/legacy/invoke", self.h_legacy),
            ("POST", p + "/scopes", self.h_create_scope), ("GET", p + "/scopes/([^/]+)", self.h_get_scope),
            ("POST", p + "/scopes/([^/]+)/children", self.h_child_scope), ("POST", p + "/parallel", self.h_parallel),
        ]
        table += self.evidence.routes(p)  # evidence.py
        if self.seams:
            table += [
                ("POST", s + "/faults", self.s_add_fault), ("GET", s + "/faults", self.s_faults), ("DELETE", s + "/faults", self.s_clear_faults),
                ("GET", s + "/admission", self.s_admission), ("POST", s + "/barrier", self.s_barrier),
                ("GET", s + "/barrier", self.s_barrier_state), ("DELETE", s + "/barrier", self.s_disarm),
                ("GET", s + "/clock", self.s_clock), ("POST", s + "/clock", self.s_clock), ("POST", s + "/retention", self.s_retention),
                ("POST", s + "/recover", self.s_recover), ("GET", s + "/instance", self.s_instance),
            ]
        return [(m, re.compile("^" + r + "$"), f) for m, r, f in table]


class Request:
    def __init__(self, method, headers, query, body):
        self.method, self.headers, self.query, self.body = method, headers, query, body

    def json(self):
        if not self.body:
            return {}
        try:
            return canon.parse(self.body)
        except canon.CanonError as e:
            raise deny(400, "malformed_request", "schema_error", 0, "request body: %s" % e)


def make_handler(host, routes, max_body):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # The headers and the body go out in two writes; with Nagle's
        # algorithm on, the second waits for the client's delayed ACK of
        # the first (about 40 ms on Linux) on a kept-alive connection, so
        # every answer took 40 ms longer than its work.
        disable_nagle_algorithm = True

        def log_message(self, fmt, *args):
            pass

        def handle_any(self):
            url = urllib.parse.urlsplit(self.path)
            n = int(self.headers.get("Content-Length") or 0)
            if n > max_body:
                self.send(413, deny(413, "body_too_large", "request", 0, "the body is too large").body())
                return
            body = self.rfile.read(n) if n else b""
            rq = Request(self.command, self.headers, urllib.parse.parse_qs(url.query), body)
            path_known = False
            for method, rx, fn in routes:
                m = rx.match(url.path)
                if not m:
                    continue
                path_known = True
                if method != self.command:
                    continue
                try:
                    status, out = fn(rq, *[urllib.parse.unquote(g) for g in m.groups()])
                except Denial as d:
                    status, out = d.status, d.body()
                except Abort as a:
                    status, out = a.denial.status, a.denial.body()
                except Exception as e:  # noqa: BLE001
                    log("internal error: %r" % e)
                    status, out = 500, deny(500, "persistence_failure", "persistence_failure", 0, "the store could not complete the request").body()
                self.send(status, out)
                return
            if path_known:
                self.send(405, deny(405, "method_not_allowed", "request", 0, "method not allowed").body())
            else:
                self.send(404, deny(404, "not_found", "request", 0, "no such endpoint in " + BINDING).body())

        def send(self, status, out):
            raw = b"" if out is None else canon.dumps(out).encode("utf-8")
            self.send_response(status)
            if out is not None:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(raw)

        do_GET = do_POST = do_PUT = do_DELETE = handle_any

    return Handler


def log(msg):
    sys.stderr.write("agl-python: %s\n" % msg)
    sys.stderr.flush()


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: aglhost.py CONFIG.json\n")
        return 2
    with open(argv[1], "rb") as fh:
        doc = canon.parse(fh.read())
    cfg = doc.get("agl")
    if cfg is None:
        print(json.dumps({"parley": "declined", "reason": "this host serves only the agl family"}), flush=True)
        return 0
    state_dir = doc.get("state_dir") or tempfile.mkdtemp(prefix="agl-python-")
    host = Host(cfg, os.path.join(state_dir, "agl"), bool(doc.get("seams")))
    server = ThreadingHTTPServer((os.environ.get("AGL_HOST", "127.0.0.1"), 0), make_handler(host, host.routes(), int(cfg.get("max_body_bytes") or 1 << 20)))
    server.daemon_threads = True

    def stop(signum, frame):
        host.shutdown()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    print(json.dumps({"parley": "ready", "http": "http://127.0.0.1:%d" % server.server_address[1],
                      "subject": {"name": "agl-python", "digest": {"sha256": source_digest()}}}), flush=True)
    server.serve_forever()
    return 0


def source_digest():
    h = hashlib.sha256()
    here = os.path.dirname(os.path.abspath(__file__))
    for name in sorted(os.listdir(here)):
        if name.endswith(".py"):
            with open(os.path.join(here, name), "rb") as fh:
                h.update(name.encode() + b"\0" + fh.read())
    return h.hexdigest()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
