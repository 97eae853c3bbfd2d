"""Bounded delegation (docs/agl-binding.md section 14, docs/hosts/agl.md 7.1).

A delegated grant is checked against every bound of its parent: operations,
resources, validity interval and the use count max_uses. A use is an
operation claimed under a grant; it is charged to the grant and to every grant
with a count it was delegated from, inside the claim transaction, so a
delegate never spends more than its delegator holds.
"""

import json

MIGRATION = """
CREATE TABLE IF NOT EXISTS grant_uses (
  grant_id TEXT NOT NULL, operation_id TEXT NOT NULL, at INTEGER NOT NULL,
  PRIMARY KEY (grant_id, operation_id));
"""

CODE_BOUND = {"grant_revoked": "revoked", "grant_expired": "expires_at",
              "grant_not_yet_valid": "not_before", "grant_uses_exhausted": "max_uses"}


def migrate(store):
    """Gives a store written before use counts its max_uses column and
    grant_uses table, once: a second host opening the file finds them."""
    with store.tx() as c:
        cols = [r["name"] for r in c.execute("PRAGMA table_info(grants)").fetchall()]
        if "max_uses" not in cols:
            c.execute("ALTER TABLE grants ADD COLUMN max_uses INTEGER")
        for stmt in MIGRATION.split(";"):
            if stmt.strip():
                c.execute(stmt)


def max_uses_from(b, deny):
    n = b.get("max_uses")
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise deny(422, "schema_error", "schema_error", 0, "max_uses must be an integer of 1 or more")
    return n


def used(c, gid):
    return c.execute("SELECT COUNT(*) AS n FROM grant_uses WHERE grant_id=?", (gid,)).fetchone()["n"]


def uses_left(c, g, step, deny):
    """Refuses a grant whose count is spent (a claim needs a use left)."""
    if g["max_uses"] is None:
        return
    n = used(c, g["id"])
    if n >= g["max_uses"]:
        raise deny(403, "grant_uses_exhausted", "authorization_denied", step,
                   "grant %s has spent its %d uses" % (g["id"], g["max_uses"]),
                   {"max_uses": g["max_uses"], "used": n})


def name_bound(d, presented, cur):
    """Adds to a grant refusal which grant of the chain and which bound."""
    det = dict(d.detail or {})
    det.setdefault("bound", CODE_BOUND.get(d.code))
    det["grant_id"] = cur["id"]
    det["delegated"] = cur["id"] != presented["id"]
    d.detail = det
    return d


def charge(c, host, g, op_id, now):
    """Records the claim of op_id as a use of g and of its ancestors with a count."""
    cur, depth = g, 0
    while cur is not None and depth < 32:
        if cur["max_uses"] is not None:
            c.execute("INSERT OR IGNORE INTO grant_uses(grant_id, operation_id, at) VALUES(?,?,?)", (cur["id"], op_id, now))
        if not cur["parent_id"]:
            return
        cur = host.grant_by_id(cur["parent_id"], c)
        depth += 1


def attenuate(host, parent, child, deny):
    """Refuses a child that exceeds its parent in any bound, naming it;
    fills in the parent's remaining uses when the child names none."""
    def widens(bound, what, **extra):
        det = {"bound": bound, "parent_grant_id": parent["id"]}
        det.update(extra)
        return deny(403, "delegation_widens", "authorization_denied", 0,
                    "a delegation may only narrow; it widens the %s" % what, det)
    pops = json.loads(parent["operations"])
    for op in child["operations"]:
        if (op == "*" and "*" not in pops) or not host.covers_op(parent, op):
            raise widens("operations", "operation " + op)
    for s in child["resources"]:
        for rid in s["ids"]:
            if rid == "*":
                if not any(ps["kind"] == s["kind"] and "*" in ps["ids"] for ps in json.loads(parent["resources"])):
                    raise widens("resources", "every %s" % s["kind"])
            elif not host.covers_resource(parent, s["kind"], rid):
                raise widens("resources", "%s %s" % (s["kind"], rid))
    if child["expires_at"] > parent["expires_at"]:
        raise widens("expires_at", "expiry")
    if child["not_before"] < parent["not_before"]:
        raise widens("not_before", "start of validity")
    if parent["max_uses"] is not None:
        left = max(parent["max_uses"] - used(host.store.conn(), parent["id"]), 0)
        if child.get("max_uses") is None:
            child["max_uses"] = left
        elif child["max_uses"] > left:
            raise widens("max_uses", "use count (%d asked, %d left)" % (child["max_uses"], left), uses_left=left)
