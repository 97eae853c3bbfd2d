"""Evidence obligations (docs/agl-binding.md section 13, docs/hosts/agl.md
section 17): questions with revisions, receipts of documents retrieved from
sources, reports citing receipts, attestations by the validators the
configuration trusts (DSSE envelopes over in-toto statements, ed25519),
review and publication. Written from the host page and the binding alone;
the standard library only, so ed25519 verification is the RFC 8032
reference arithmetic."""

import base64
import hashlib
import urllib.error
import urllib.parse
import urllib.request

import canon

SCHEMA = """
CREATE TABLE IF NOT EXISTS ev_questions (id TEXT PRIMARY KEY, execution_id TEXT NOT NULL, text TEXT NOT NULL, revision INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS ev_receipts (id TEXT PRIMARY KEY, question_id TEXT NOT NULL, question_revision INTEGER NOT NULL,
  source_url TEXT NOT NULL, content_digest TEXT NOT NULL, content_length INTEGER NOT NULL, retrieved_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS ev_reports (id TEXT PRIMARY KEY, question_id TEXT NOT NULL, question_revision INTEGER NOT NULL,
  body TEXT NOT NULL, evidence TEXT NOT NULL, digest TEXT NOT NULL, state TEXT NOT NULL, reviewer TEXT);
CREATE TABLE IF NOT EXISTS ev_attestations (id TEXT PRIMARY KEY, report_id TEXT NOT NULL, report_digest TEXT NOT NULL, judgment TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ev_publications (id TEXT PRIMARY KEY, report_id TEXT NOT NULL UNIQUE, attestation_id TEXT NOT NULL, published_at INTEGER NOT NULL);
"""

INTOTO = "application/vnd.in-toto+json"
STATEMENT = "https://in-toto.io/Statement/v1"
PREDICATE = "https://parley.dev/agl/evidence-attestation/v1"

# --- ed25519 verification (RFC 8032, section 5.1.7) ---------------------------

_P = 2 ** 255 - 19
_L = 2 ** 252 + 27742317777372353535851937790883648493
_D = -121665 * pow(121666, _P - 2, _P) % _P
_I = pow(2, (_P - 1) // 4, _P)


def _recover_x(y, sign):
    if y >= _P:
        return None
    x2 = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P) % _P
    if x2 == 0:
        return None if sign else 0
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P:
        x = x * _I % _P
    if (x * x - x2) % _P:
        return None
    if (x & 1) != sign:
        x = _P - x
    return x


def _add(a, b):
    A = (a[1] - a[0]) * (b[1] - b[0]) % _P
    B = (a[1] + a[0]) * (b[1] + b[0]) % _P
    C = 2 * a[3] * b[3] * _D % _P
    D = 2 * a[2] * b[2] % _P
    E, F, G, H = B - A, D - C, D + C, B + A
    return (E * F % _P, G * H % _P, F * G % _P, E * H % _P)


def _mul(s, pt):
    q = (0, 1, 1, 0)
    while s > 0:
        if s & 1:
            q = _add(q, pt)
        pt = _add(pt, pt)
        s >>= 1
    return q


def _equal(a, b):
    return (a[0] * b[2] - b[0] * a[2]) % _P == 0 and (a[1] * b[2] - b[1] * a[2]) % _P == 0


def _point(raw):
    y = int.from_bytes(raw, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    x = _recover_x(y, sign)
    return None if x is None else (x, y, 1, x * y % _P)


_GY = 4 * pow(5, _P - 2, _P) % _P
_GX = _recover_x(_GY, 0)
_G = (_GX, _GY, 1, _GX * _GY % _P)


def ed25519_verify(pub, msg, sig):
    if len(pub) != 32 or len(sig) != 64:
        return False
    a, r = _point(pub), _point(sig[:32])
    if a is None or r is None:
        return False
    s = int.from_bytes(sig[32:], "little")
    if s >= _L:
        return False
    h = int.from_bytes(hashlib.sha512(sig[:32] + pub + msg).digest(), "little") % _L
    return _equal(_mul(s, _G), _add(r, _mul(h, a)))


def key_id(pub):
    # SHA-256 of the key's PKIX (SubjectPublicKeyInfo) encoding.
    return "sha256:" + hashlib.sha256(bytes.fromhex("302a300506032b6570032100") + pub).hexdigest()


def pae(payload_type, payload):
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def sha256(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


class Evidence:
    def __init__(self, host, deny, strict, new_id, ts, jdump, jload):
        self.h = host
        self.deny, self.strict, self.new_id, self.ts, self.jdump, self.jload = deny, strict, new_id, ts, jdump, jload
        cfg = host.cfg.get("evidence") or {}
        self.timeout = (cfg.get("source_timeout_ms") or 10000) / 1000.0
        self.max_bytes = cfg.get("max_source_bytes") or (4 << 20)
        self.validators = []
        for v in cfg.get("validators") or []:
            raw = base64.b64decode(v["public_key"])
            if len(raw) != 32 or v.get("kind") not in ("deterministic", "llm") or not v.get("name"):
                raise ValueError("evidence validator %r is not a name, a 32-byte key and a kind" % v.get("name"))
            self.validators.append((v["name"], v["kind"], raw))
        host.store.conn().executescript(SCHEMA)

    def routes(self, p):
        return [
            ("POST", p + "/evidence/questions", self.h_question), ("PUT", p + "/evidence/questions/([^/]+)", self.h_revise),
            ("GET", p + "/evidence/questions/([^/]+)", self.h_get_question),
            ("POST", p + "/evidence/questions/([^/]+)/receipts", self.h_collect),
            ("GET", p + "/evidence/receipts/([^/]+)", self.h_get_receipt),
            ("POST", p + "/evidence/reports", self.h_report), ("GET", p + "/evidence/reports/([^/]+)", self.h_get_report),
            ("POST", p + "/evidence/reports/([^/]+)/review", self.h_review),
            ("POST", p + "/evidence/reports/([^/]+)/attestations", self.h_attest),
            ("POST", p + "/evidence/reports/([^/]+)/publication", self.h_publish),
            ("GET", p + "/evidence/publications/([^/]+)", self.h_get_publication),
        ]

    def operator(self, rq):
        self.h.require(rq.headers, "operator", self.h.keys.get("operator_key"))

    # -- questions ---------------------------------------------------------------

    def question(self, c, qid):
        row = c.execute("SELECT id, execution_id, text, revision FROM ev_questions WHERE id=?", (qid,)).fetchone()
        if row is None:
            raise self.deny(404, "unknown_question", "schema_error", 0, "no question %s" % qid)
        n = c.execute("SELECT COUNT(*) FROM ev_receipts WHERE question_id=? AND question_revision=?", (qid, row["revision"])).fetchone()[0]
        return {"question_id": row["id"], "execution_id": row["execution_id"], "text": row["text"], "revision": row["revision"],
                "state": "Collected" if n else "Unresearched"}

    def h_question(self, rq):
        self.operator(rq)
        b = self.strict(rq.json(), ("execution_id", "text"), ("execution_id", "text"))
        if not isinstance(b["execution_id"], str) or not b["execution_id"] or not isinstance(b["text"], str) or not b["text"]:
            raise self.deny(422, "schema_error", "schema_error", 0, "execution_id and text are strings")
        qid = self.new_id("q_")
        with self.h.store.tx() as c:
            c.execute("INSERT INTO ev_questions(id, execution_id, text, revision) VALUES(?,?,?,1)", (qid, b["execution_id"], b["text"]))
            self.h.audit(c, {"event": "evidence_question_opened", "execution_id": b["execution_id"], "resource_id": qid,
                             "resource_revision": 1, "resource_state": "Unresearched"})
            return 201, self.question(c, qid)

    def h_revise(self, rq, qid):
        self.operator(rq)
        b = self.strict(rq.json(), ("text", "expected_revision"), ("text", "expected_revision"))
        with self.h.store.tx() as c:
            q = self.question(c, qid)
            if q["revision"] != b["expected_revision"]:
                raise self.deny(409, "stale_revision", "stale_revision", 0, "the question is at revision %d" % q["revision"])
            c.execute("UPDATE ev_questions SET text=?, revision=? WHERE id=?", (b["text"], q["revision"] + 1, qid))
            self.h.audit(c, {"event": "evidence_question_revised", "execution_id": q["execution_id"], "resource_id": qid,
                             "resource_revision": q["revision"] + 1, "resource_state": "Unresearched"})
            return 200, self.question(c, qid)

    def h_get_question(self, rq, qid):
        return 200, self.question(self.h.store.conn(), qid)

    # -- receipts ----------------------------------------------------------------

    def receipt_view(self, row):
        return {"receipt_id": row["id"], "question_id": row["question_id"], "question_revision": row["question_revision"],
                "source": {"url": row["source_url"]}, "content_digest": row["content_digest"],
                "content_length": row["content_length"], "retrieved_at": self.ts(row["retrieved_at"]), "state": "Collected"}

    def h_collect(self, rq, qid):
        self.operator(rq)
        b = self.strict(rq.json(), ("question_revision", "source"), ("question_revision", "source"))
        src = b["source"]
        if not isinstance(src, dict) or set(src) - {"url", "credential"} or not isinstance(src.get("url"), str):
            raise self.deny(422, "schema_error", "schema_error", 0, "source is {url, credential?}")
        u = urllib.parse.urlsplit(src["url"])
        if u.scheme not in ("http", "https") or not u.hostname:
            raise self.deny(422, "schema_error", "schema_error", 0, "source.url must be http(s)")
        q = self.question(self.h.store.conn(), qid)
        if q["revision"] != b["question_revision"]:
            raise self.deny(409, "stale_revision", "stale_revision", 0, "the question is at revision %d" % q["revision"])
        req = urllib.request.Request(src["url"], method="GET")
        if src.get("credential"):
            req.add_header("Authorization", "Bearer " + src["credential"])
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                body = resp.read(self.max_bytes + 1)
                status = resp.status
        except (urllib.error.URLError, OSError):
            raise self.deny(502, "source_unavailable", "source", 0, "the source could not be retrieved", retryable=True)
        if status != 200 or len(body) > self.max_bytes:
            raise self.deny(502, "source_unavailable", "source", 0, "the source answered %d" % status, retryable=True)
        public = urllib.parse.urlunsplit((u.scheme, u.hostname + (":%d" % u.port if u.port else ""), u.path, "", ""))
        rid, at = self.new_id("rcp_"), self.h.now()
        with self.h.store.tx() as c:
            q = self.question(c, qid)
            if q["revision"] != b["question_revision"]:
                raise self.deny(409, "stale_revision", "stale_revision", 0, "the question was revised while the source was read")
            c.execute("INSERT INTO ev_receipts VALUES(?,?,?,?,?,?,?)", (rid, qid, q["revision"], public, sha256(body), len(body), at))
            self.h.audit(c, {"event": "evidence_collected", "execution_id": q["execution_id"], "resource_id": qid,
                             "resource_revision": q["revision"], "resource_state": "Collected",
                             "detail": "receipt %s of %s content %s" % (rid, public, sha256(body))})
            return 201, self.receipt_view(c.execute("SELECT * FROM ev_receipts WHERE id=?", (rid,)).fetchone())

    def h_get_receipt(self, rq, rid):
        row = self.h.store.one("SELECT * FROM ev_receipts WHERE id=?", rid)
        if row is None:
            raise self.deny(404, "unknown_receipt", "schema_error", 0, "no receipt %s" % rid)
        return 200, self.receipt_view(row)

    # -- reports -----------------------------------------------------------------

    def report(self, c, rid):
        row = c.execute("SELECT * FROM ev_reports WHERE id=?", (rid,)).fetchone()
        if row is None:
            raise self.deny(404, "unknown_report", "schema_error", 0, "no report %s" % rid)
        out = {"report_id": row["id"], "question_id": row["question_id"], "question_revision": row["question_revision"],
               "body": self.jload(row["body"]), "evidence": self.jload(row["evidence"]), "report_digest": row["digest"], "state": row["state"]}
        if row["reviewer"]:
            out["reviewer"] = row["reviewer"]
        pub = c.execute("SELECT id FROM ev_publications WHERE report_id=?", (rid,)).fetchone()
        if pub:
            out["publication_id"] = pub[0]
        return out

    def h_report(self, rq):
        self.operator(rq)
        b = self.strict(rq.json(), ("question_id", "question_revision", "receipt_ids", "body"), ("question_id", "question_revision", "receipt_ids", "body"))
        if not isinstance(b["body"], dict) or not isinstance(b["receipt_ids"], list) or not b["receipt_ids"]:
            raise self.deny(422, "schema_error", "schema_error", 0, "an object body and at least one receipt id are required")
        with self.h.store.tx() as c:
            q = self.question(c, b["question_id"])
            if q["revision"] != b["question_revision"]:
                raise self.deny(409, "stale_revision", "stale_revision", 0, "the question is at revision %d" % q["revision"])
            items = []
            for rid in b["receipt_ids"]:
                row = c.execute("SELECT * FROM ev_receipts WHERE id=?", (rid,)).fetchone()
                if row is None:
                    raise self.deny(422, "unknown_receipt", "schema_error", 0, "no receipt %s" % rid)
                if row["question_id"] != q["question_id"]:
                    raise self.deny(409, "other_question", "invalid_protocol_state", 0, "receipt %s concerns another question" % rid, {"receipt_id": rid})
                if row["question_revision"] != q["revision"]:
                    raise self.deny(409, "stale_revision", "stale_revision", 0, "receipt %s concerns another revision" % rid, {"receipt_id": rid})
                if any(i["receipt_id"] == rid for i in items):
                    raise self.deny(422, "schema_error", "schema_error", 0, "receipt %s is cited twice" % rid)
                items.append({"receipt_id": rid, "content_digest": row["content_digest"]})
            digest = canon.digest({"question_id": q["question_id"], "question_revision": q["revision"], "body": b["body"], "evidence": items})[0]
            rid = self.new_id("rpt_")
            c.execute("INSERT INTO ev_reports VALUES(?,?,?,?,?,?,?,NULL)",
                      (rid, q["question_id"], q["revision"], self.jdump(b["body"]), self.jdump(items), digest, "Drafted"))
            self.h.audit(c, {"event": "evidence_report_drafted", "execution_id": q["execution_id"], "resource_id": rid,
                             "resource_state": "Drafted", "proposal_digest": digest})
            return 201, self.report(c, rid)

    def h_get_report(self, rq, rid):
        c = self.h.store.conn()
        out = self.report(c, rid)
        q = self.question(c, out["question_id"])
        if q["revision"] != out["question_revision"]:
            out["question_current_revision"] = q["revision"]
        return 200, out

    def h_review(self, rq, rid):
        self.operator(rq)
        b = self.strict(rq.json(), ("reviewer",), ("reviewer",))
        with self.h.store.tx() as c:
            r = self.report(c, rid)
            if r["state"] != "Drafted":
                raise self.deny(409, "invalid_protocol_state", "invalid_protocol_state", 0, "the report is %s" % r["state"])
            q = self.question(c, r["question_id"])
            c.execute("UPDATE ev_reports SET state='Reviewed', reviewer=? WHERE id=?", (b["reviewer"], rid))
            self.h.audit(c, {"event": "evidence_report_reviewed", "execution_id": q["execution_id"], "resource_id": rid,
                             "resource_state": "Reviewed", "proposal_digest": r["report_digest"], "decision_actor": b["reviewer"]})
            return 200, self.report(c, rid)

    # -- attestations ------------------------------------------------------------

    def verify(self, env):
        if not isinstance(env, dict) or env.get("payloadType") != INTOTO or not isinstance(env.get("payload"), str):
            raise self.deny(400, "malformed_attestation", "schema_error", 0, "not a DSSE envelope of %s" % INTOTO)
        try:
            payload = base64.b64decode(env["payload"], validate=True)
        except ValueError:
            raise self.deny(400, "malformed_attestation", "schema_error", 0, "the payload is not base64")
        msg = pae(INTOTO, payload)
        for s in env.get("signatures") or []:
            try:
                sig = base64.b64decode(s.get("sig", ""), validate=True)
            except ValueError:
                continue
            for v in self.validators:
                if ed25519_verify(v[2], msg, sig):
                    return payload, v
        raise self.deny(403, "untrusted_validator", "authorization_denied", 0, "no validator this host trusts signed this payload")

    def h_attest(self, rq, rid):
        self.operator(rq)
        b = self.strict(rq.json(), ("envelope",), ("envelope",))
        payload, (vname, vkind, vkey) = self.verify(b["envelope"])
        try:
            st = canon.parse(payload)
            pred = st["predicate"]
            ok = (st.get("_type") == STATEMENT and st.get("predicateType") == PREDICATE and pred["policy"]["name"]
                  and pred["policy"]["version"] and pred["result"] in ("pass", "fail"))
        except (canon.CanonError, KeyError, TypeError):
            ok = False
        if not ok:
            raise self.deny(400, "malformed_attestation", "schema_error", 0, "not an evidence attestation statement")
        with self.h.store.tx() as c:
            r = self.report(c, rid)
            q = self.question(c, r["question_id"])
            subjects = st.get("subject") or []
            bound = pred.get("report_digest") == r["report_digest"] and subjects and all(
                isinstance(s, dict) and "sha256:" + str((s.get("digest") or {}).get("sha256")) == r["report_digest"] for s in subjects)
            if not bound:
                raise self.deny(409, "attestation_unbound", "proposal_mismatch", 0, "the attestation is about another report digest",
                                {"report_digest": r["report_digest"]})
            inspected = sorted((i.get("receipt_id"), i.get("content_digest")) for i in (pred.get("evidence") or []) if isinstance(i, dict))
            cited = sorted((i["receipt_id"], i["content_digest"]) for i in r["evidence"])
            if inspected != cited or len(inspected) != len(pred.get("evidence") or []):
                raise self.deny(409, "evidence_mismatch", "proposal_mismatch", 0, "the evidence inspected is not the evidence the report cites",
                                {"evidence": r["evidence"]})
            if q["revision"] != r["question_revision"]:
                raise self.deny(409, "stale_revision", "stale_revision", 0, "the question was revised after the report was drafted")
            judgment = {"kind": "judgment", "validator": vname, "validator_kind": vkind, "key_id": key_id(vkey),
                        "policy": pred["policy"]["name"], "policy_version": pred["policy"]["version"], "result": pred["result"],
                        "evidence": pred["evidence"], "report_digest": r["report_digest"]}
            aid = self.new_id("att_")
            c.execute("INSERT INTO ev_attestations VALUES(?,?,?,?)", (aid, rid, r["report_digest"], self.jdump(judgment)))
            state = "CheckedAgainstPolicy" if pred["result"] == "pass" else "Collected"
            self.h.audit(c, {"event": "evidence_attested", "execution_id": q["execution_id"], "resource_id": rid, "resource_state": state,
                             "proposal_digest": r["report_digest"], "decision_actor": "validator:" + vname,
                             "detail": "%s judgment by %s under %s %s: %s" % (vkind, vname, pred["policy"]["name"], pred["policy"]["version"], pred["result"])})
            return 201, {"attestation_id": aid, "report_id": rid, "report_digest": r["report_digest"], "judgment": judgment, "evidence_state": state}

    # -- publication -------------------------------------------------------------

    def publication(self, c, pid):
        row = c.execute("SELECT p.id, p.report_id, p.attestation_id, p.published_at, a.judgment, a.report_digest FROM ev_publications p "
                        "JOIN ev_attestations a ON a.id = p.attestation_id WHERE p.id=?", (pid,)).fetchone()
        if row is None:
            raise self.deny(404, "unknown_publication", "schema_error", 0, "no publication %s" % pid)
        return {"publication_id": row["id"], "report_id": row["report_id"], "report_digest": row["report_digest"],
                "attestation_id": row["attestation_id"], "judgment": self.jload(row["judgment"]),
                "published_at": self.ts(row["published_at"]), "state": "Published"}

    def h_publish(self, rq, rid):
        self.operator(rq)
        b = self.strict(rq.json(), ("attestation_id",))
        with self.h.store.tx() as c:
            r = self.report(c, rid)
            q = self.question(c, r["question_id"])
            if "publication_id" in r:
                raise self.deny(409, "already_published", "invalid_protocol_state", 0, "the report is already published")
            if r["state"] != "Reviewed":
                raise self.deny(409, "invalid_protocol_state", "invalid_protocol_state", 0, "the report is %s; publication needs Reviewed" % r["state"])
            if q["revision"] != r["question_revision"]:
                raise self.deny(409, "stale_revision", "stale_revision", 0, "the question moved past the report's revision")
            aid = b.get("attestation_id")
            row = c.execute("SELECT * FROM ev_attestations WHERE id=?", (aid,)).fetchone() if aid else None
            if row is None:
                raise self.deny(409, "attestation_required", "invalid_protocol_state", 0, "publication needs an attestation of this report")
            if row["report_id"] != rid or row["report_digest"] != r["report_digest"]:
                raise self.deny(409, "attestation_unbound", "proposal_mismatch", 0, "the attestation is about another report",
                                {"report_digest": r["report_digest"], "attested_digest": row["report_digest"]})
            if self.jload(row["judgment"]).get("result") != "pass":
                raise self.deny(409, "attestation_required", "invalid_protocol_state", 0, "the validator's judgment does not pass the report")
            pid = self.new_id("pub_")
            c.execute("INSERT INTO ev_publications VALUES(?,?,?,?)", (pid, rid, aid, self.h.now()))
            c.execute("UPDATE ev_reports SET state='Published' WHERE id=?", (rid,))
            self.h.audit(c, {"event": "evidence_published", "execution_id": q["execution_id"], "resource_id": rid, "resource_state": "Published",
                             "proposal_digest": r["report_digest"], "detail": "publication %s bound to attestation %s" % (pid, aid)})
            return 201, self.publication(c, pid)

    def h_get_publication(self, rq, pid):
        return 200, self.publication(self.h.store.conn(), pid)
