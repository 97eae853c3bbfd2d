package agl

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"time"
)

// ResourceScope lists the resource IDs of one kind a grant covers; "*"
// covers every resource of that kind.
type ResourceScope struct {
	Kind string   `json:"kind"`
	IDs  []string `json:"ids"`
}

type grantRequest struct {
	Subject    string          `json:"subject"`
	Operations []string        `json:"operations"`
	Resources  []ResourceScope `json:"resources"`
	NotBefore  *time.Time      `json:"not_before,omitempty"`
	ExpiresAt  *time.Time      `json:"expires_at,omitempty"`
	TTLSeconds int             `json:"ttl_seconds,omitempty"`
	// MaxUses bounds how many operations may be claimed under the grant
	// and every grant delegated from it (delegation.go); absent: no count.
	MaxUses *int64 `json:"max_uses,omitempty"`
}

type grantRow struct {
	ID         string
	Issuer     string
	Subject    string
	Operations []string
	Resources  []ResourceScope
	NotBefore  int64
	ExpiresAt  int64
	ParentID   string
	RevokedAt  *int64
	MaxUses    *int64
}

func (g *grantRow) view() map[string]any {
	return map[string]any{
		"grant_id": g.ID, "issuer": g.Issuer, "subject": g.Subject, "operations": g.Operations,
		"resources": g.Resources, "not_before": msTime(g.NotBefore), "expires_at": msTime(g.ExpiresAt),
		"parent_grant_id": nullStr(g.ParentID), "revoked_at": msPtr(g.RevokedAt), "max_uses": g.MaxUses,
	}
}

type querier interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}

const grantCols = `id, issuer, subject, operations, resources, not_before, expires_at, COALESCE(parent_id,''), revoked_at, max_uses`

func scanGrant(row *sql.Row) (*grantRow, error) {
	g := &grantRow{}
	var ops, res string
	var rev, maxUses sql.NullInt64
	if err := row.Scan(&g.ID, &g.Issuer, &g.Subject, &ops, &res, &g.NotBefore, &g.ExpiresAt, &g.ParentID, &rev, &maxUses); err != nil {
		return nil, err
	}
	json.Unmarshal([]byte(ops), &g.Operations)
	json.Unmarshal([]byte(res), &g.Resources)
	if rev.Valid {
		g.RevokedAt = &rev.Int64
	}
	if maxUses.Valid {
		g.MaxUses = &maxUses.Int64
	}
	return g, nil
}

var (
	sqlGrantByID    = hot(`SELECT ` + grantCols + ` FROM grants WHERE id=?`)
	sqlGrantByToken = hot(`SELECT ` + grantCols + ` FROM grants WHERE token_hash=?`)
)

func (h *Host) grantByID(ctx context.Context, q querier, id string) (*grantRow, error) {
	return scanGrant(h.st.row(ctx, q, sqlGrantByID, id))
}

func (h *Host) grantByToken(ctx context.Context, q querier, token string) (*grantRow, error) {
	return scanGrant(h.st.row(ctx, q, sqlGrantByToken, hashToken(token)))
}

// checkGrantChain refuses a grant that, or any of whose ancestors, is
// revoked, expired, not yet valid or has spent its uses: revoking a grant
// revokes every grant delegated from it, and a delegate's uses are its
// delegator's too (delegation.go). Each denial names the grant and the
// bound it ran into.
func (h *Host) checkGrantChain(ctx context.Context, q querier, g *grantRow, step int) *Denial {
	now := h.nowMS()
	for cur, depth := g, 0; cur != nil && depth < 32; depth++ {
		var d *Denial
		switch {
		case cur.RevokedAt != nil:
			d = deny(403, "grant_revoked", "authorization_denied", step, "grant %s is revoked", cur.ID)
		case now >= cur.ExpiresAt:
			d = deny(403, "grant_expired", "authorization_denied", step, "grant %s expired at %s", cur.ID, msTime(cur.ExpiresAt))
		case now < cur.NotBefore:
			d = deny(403, "grant_not_yet_valid", "authorization_denied", step, "grant %s is valid from %s", cur.ID, msTime(cur.NotBefore))
		case step == 6 || step == 7:
			// A claim needs a use left. A proposal (step 3) is no use, and
			// a retry or a recovery (step 8) spends none: its operation
			// was charged when claimed.
			d = h.usesLeft(ctx, q, cur, step)
		}
		if d != nil {
			return boundDenial(d, g, cur)
		}
		if cur.ParentID == "" {
			return nil
		}
		p, err := h.grantByID(ctx, q, cur.ParentID)
		if err != nil {
			return deny(403, "grant_revoked", "authorization_denied", step, "grant %s has no valid parent", cur.ID)
		}
		cur = p
	}
	return deny(403, "grant_revoked", "authorization_denied", step, "delegation chain too deep")
}

func (g *grantRow) coversOperation(op string) bool {
	return contains(g.Operations, op) || contains(g.Operations, "*")
}

func (g *grantRow) coversResource(kind, id string) bool {
	for _, s := range g.Resources {
		if s.Kind == kind && (contains(s.IDs, id) || contains(s.IDs, "*")) {
			return true
		}
	}
	return false
}

func (h *Host) grantFromRequest(req grantRequest) (*grantRow, *Denial) {
	if req.Subject == "" || len(req.Operations) == 0 {
		return nil, deny(422, "schema_error", "schema_error", 0, "subject and operations are required")
	}
	now := h.now()
	g := &grantRow{Subject: req.Subject, Operations: req.Operations, Resources: req.Resources, NotBefore: now.UnixMilli()}
	if g.Resources == nil {
		g.Resources = []ResourceScope{}
	}
	for _, s := range g.Resources {
		if s.Kind == "" || len(s.IDs) == 0 {
			return nil, deny(422, "schema_error", "schema_error", 0, "each resource scope needs a kind and ids")
		}
	}
	if req.NotBefore != nil {
		g.NotBefore = req.NotBefore.UnixMilli()
	}
	switch {
	case req.ExpiresAt != nil:
		g.ExpiresAt = req.ExpiresAt.UnixMilli()
	case req.TTLSeconds > 0:
		g.ExpiresAt = now.Add(time.Duration(req.TTLSeconds) * time.Second).UnixMilli()
	default:
		return nil, deny(422, "schema_error", "schema_error", 0, "expires_at or ttl_seconds is required: grants are never unbounded")
	}
	if g.ExpiresAt <= g.NotBefore {
		return nil, deny(422, "schema_error", "schema_error", 0, "expires_at must follow not_before")
	}
	if req.MaxUses != nil {
		if *req.MaxUses < 1 {
			return nil, deny(422, "schema_error", "schema_error", 0, "max_uses must be 1 or more")
		}
		n := *req.MaxUses
		g.MaxUses = &n
	}
	return g, nil
}

func (h *Host) insertGrant(tx *sql.Tx, g *grantRow) (string, error) {
	token := randomToken("agt_")
	ops, _ := json.Marshal(g.Operations)
	res, _ := json.Marshal(g.Resources)
	var maxUses any
	if g.MaxUses != nil {
		maxUses = *g.MaxUses
	}
	_, err := tx.Exec(`INSERT INTO grants(id,token_hash,issuer,subject,operations,resources,not_before,expires_at,parent_id,created_at,max_uses)
		VALUES(?,?,?,?,?,?,?,?,?,?,?)`, g.ID, hashToken(token), g.Issuer, g.Subject, string(ops), string(res),
		g.NotBefore, g.ExpiresAt, nullStr(g.ParentID), h.nowMS(), maxUses)
	if err != nil {
		return "", err
	}
	return token, h.audit(tx, auditRecord{Event: "grant_issued", GrantID: g.ID, Principal: g.Subject,
		Detail: "issuer " + g.Issuer + "; parent " + g.ParentID})
}

// hIssueGrant: only the authorization service (authority key) issues root
// grants; a model or client can request authority but never create it.
func (h *Host) hIssueGrant(w http.ResponseWriter, r *http.Request) {
	if d := h.requireKey(r, "authority", h.cfg.Keys.Authority); d != nil {
		writeDenial(w, d)
		return
	}
	var req grantRequest
	if d := decode(r, &req); d != nil {
		writeDenial(w, d)
		return
	}
	g, d := h.grantFromRequest(req)
	if d != nil {
		writeDenial(w, d)
		return
	}
	g.ID, g.Issuer = newID("grant_"), h.cfg.AuthorityIssuer
	var token string
	err := h.st.tx(r.Context(), func(tx *sql.Tx) (err error) {
		token, err = h.insertGrant(tx, g)
		return err
	})
	if err != nil {
		h.fail(w, err)
		return
	}
	v := g.view()
	v["grant_token"] = token
	writeJSON(w, 201, v)
}

// hDelegate lets the holder of a grant (its token as bearer) derive a
// narrower grant for another subject.
func (h *Host) hDelegate(w http.ResponseWriter, r *http.Request) {
	tok := bearer(r)
	if tok == "" {
		writeDenial(w, deny(401, "unauthenticated", "authorization_denied", 0, "delegation requires the parent grant token as bearer"))
		return
	}
	var req grantRequest
	if d := decode(r, &req); d != nil {
		writeDenial(w, d)
		return
	}
	parent, err := h.grantByToken(r.Context(), h.st.db, tok)
	if err != nil || parent.ID != r.PathValue("id") {
		writeDenial(w, deny(403, "wrong_credentials", "authorization_denied", 0, "the bearer token is not this grant's token"))
		return
	}
	if d := h.checkGrantChain(r.Context(), h.st.db, parent, 0); d != nil {
		writeDenial(w, d)
		return
	}
	child, d := h.attenuate(r.Context(), parent, req)
	if d != nil {
		writeDenial(w, d)
		return
	}
	child.ID, child.Issuer, child.ParentID = newID("grant_"), parent.Subject, parent.ID
	var token string
	err = h.st.tx(r.Context(), func(tx *sql.Tx) (err error) {
		token, err = h.insertGrant(tx, child)
		return err
	})
	if err != nil {
		h.fail(w, err)
		return
	}
	v := child.view()
	v["grant_token"] = token
	writeJSON(w, 201, v)
}

func (h *Host) hRevokeGrant(w http.ResponseWriter, r *http.Request) {
	if d := h.requireKey(r, "authority", h.cfg.Keys.Authority); d != nil {
		writeDenial(w, d)
		return
	}
	id := r.PathValue("id")
	var g *grantRow
	err := h.st.tx(r.Context(), func(tx *sql.Tx) error {
		res, err := tx.Exec(`UPDATE grants SET revoked_at=? WHERE id=? AND revoked_at IS NULL`, h.nowMS(), id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			if err := h.audit(tx, auditRecord{Event: "grant_revoked", GrantID: id}); err != nil {
				return err
			}
		}
		g, err = h.grantByID(r.Context(), tx, id)
		return err
	})
	if isNoRows(err) {
		writeDenial(w, deny(404, "not_found", "request", 0, "no such grant"))
		return
	} else if err != nil {
		h.fail(w, err)
		return
	}
	v := g.view()
	if g.MaxUses != nil {
		if n, err := h.usedBy(r.Context(), h.st.db, g.ID); err == nil {
			v["uses"] = n
		}
	}
	writeJSON(w, 200, v)
}

func (h *Host) hGetGrant(w http.ResponseWriter, r *http.Request) {
	if d := h.requireKey(r, "authority", h.cfg.Keys.Authority, h.cfg.Keys.Operator); d != nil {
		writeDenial(w, d)
		return
	}
	g, err := h.grantByID(r.Context(), h.st.db, r.PathValue("id"))
	if isNoRows(err) {
		writeDenial(w, deny(404, "not_found", "request", 0, "no such grant"))
		return
	} else if err != nil {
		h.fail(w, err)
		return
	}
	v := g.view()
	if g.MaxUses != nil {
		if n, err := h.usedBy(r.Context(), h.st.db, g.ID); err == nil {
			v["uses"] = n
		}
	}
	writeJSON(w, 200, v)
}
