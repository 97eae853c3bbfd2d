package agl

import (
	"context"
	"database/sql"
	"time"
)

// Bounded delegation (spec 4.3, 13 Stage 3). A delegated grant is its
// delegator's authority attenuated in every bound a grant has: the
// operations and resources it covers, its validity interval and the number
// of operations that may be claimed under it (max_uses). Redelegating
// repeats the same check against the delegate's own grant, so a chain only
// narrows. A use is charged, in the claim transaction, to the grant the
// dispatch presents and to every grant it was delegated from
// (grant_uses), so a delegate never spends more than its delegator holds:
// when the delegator's count is spent, the delegate stops too. Delegated
// authority has no dispatcher of its own: it is checked by
// checkGrantChain at steps 3, 6 and 7 like any grant, and its operations
// are claimed, deduplicated and audited by the one dispatcher.

// The bounds a grant has, as a denial names them in detail.bound.
const (
	boundOperations = "operations"
	boundResources  = "resources"
	boundExpiry     = "expires_at"
	boundNotBefore  = "not_before"
	boundMaxUses    = "max_uses"
	boundRevoked    = "revoked"
)

var (
	sqlGrantUses   = hot(`SELECT COUNT(*) FROM grant_uses WHERE grant_id=?`)
	sqlChargeGrant = hot(`INSERT OR IGNORE INTO grant_uses(grant_id, operation_id, at) VALUES(?,?,?)`)
)

// usedBy counts the operations claimed under g or a grant delegated from it.
func (h *Host) usedBy(ctx context.Context, q querier, id string) (int64, error) {
	var n int64
	err := h.st.row(ctx, q, sqlGrantUses, id).Scan(&n)
	return n, err
}

// usesLeft refuses a grant whose max_uses are spent.
func (h *Host) usesLeft(ctx context.Context, q querier, g *grantRow, step int) *Denial {
	if g.MaxUses == nil {
		return nil
	}
	n, err := h.usedBy(ctx, q, g.ID)
	if err != nil {
		return deny(403, "authority_missing", "authorization_denied", step, "the uses of grant %s cannot be read", g.ID)
	}
	if n >= *g.MaxUses {
		d := deny(403, "grant_uses_exhausted", "authorization_denied", step, "grant %s has spent its %d uses", g.ID, *g.MaxUses)
		d.Detail = map[string]any{"max_uses": *g.MaxUses, "used": n}
		return d
	}
	return nil
}

// boundDenial adds to a denial of grant g, met at cur (g itself or the
// grant it was delegated from, at any depth), which grant and which bound
// stopped it.
func boundDenial(d *Denial, g, cur *grantRow) *Denial {
	if d.Detail == nil {
		d.Detail = map[string]any{}
	}
	d.Detail["grant_id"] = cur.ID
	d.Detail["delegated"] = cur.ID != g.ID
	if _, ok := d.Detail["bound"]; !ok {
		d.Detail["bound"] = map[string]string{"grant_revoked": boundRevoked, "grant_expired": boundExpiry,
			"grant_not_yet_valid": boundNotBefore, "grant_uses_exhausted": boundMaxUses}[d.Code]
	}
	return d
}

// chargeUses records operation opID as a use of g and of every grant it
// was delegated from that has a max_uses. It runs in the claim transaction, after
// checkGrantChain found a use left on each of them, so two claims cannot
// both spend a grant's last use.
func (h *Host) chargeUses(ctx context.Context, tx *sql.Tx, g *grantRow, opID string) error {
	now := h.nowMS()
	for cur, depth := g, 0; cur != nil && depth < 32; depth++ {
		if cur.MaxUses != nil { // only counted bounds need their uses
			if _, err := h.st.exec(ctx, tx, sqlChargeGrant, cur.ID, opID, now); err != nil {
				return err
			}
		}
		if cur.ParentID == "" {
			return nil
		}
		p, err := h.grantByID(ctx, tx, cur.ParentID)
		if err != nil {
			return err
		}
		cur = p
	}
	return nil
}

// widens is the refusal of a delegation that asks for more than its
// parent holds, naming the bound.
func widens(parent *grantRow, bound, format string, a ...any) *Denial {
	d := deny(403, "delegation_widens", "authorization_denied", 0, "a delegation may only narrow its parent; it widens the "+format, a...)
	d.Detail = map[string]any{"bound": bound, "parent_grant_id": parent.ID}
	return d
}

// attenuate builds the grant parent's holder asks for with req, refusing
// one that exceeds the parent in any bound. Omitted bounds are inherited:
// the parent's expiry, its not_before when later than now, and what is
// left of its uses.
func (h *Host) attenuate(ctx context.Context, parent *grantRow, req grantRequest) (*grantRow, *Denial) {
	if req.ExpiresAt == nil && req.TTLSeconds == 0 {
		t := time.UnixMilli(parent.ExpiresAt)
		req.ExpiresAt = &t
	}
	child, d := h.grantFromRequest(req)
	if d != nil {
		return nil, d
	}
	if req.NotBefore == nil && child.NotBefore < parent.NotBefore {
		child.NotBefore = parent.NotBefore
	}
	for _, op := range child.Operations {
		if op == "*" && !contains(parent.Operations, "*") {
			return nil, widens(parent, boundOperations, "operation wildcard")
		}
		if !parent.coversOperation(op) {
			return nil, widens(parent, boundOperations, "operation %s", op)
		}
	}
	for _, s := range child.Resources {
		for _, id := range s.IDs {
			if id == "*" {
				ok := false
				for _, ps := range parent.Resources {
					ok = ok || (ps.Kind == s.Kind && contains(ps.IDs, "*"))
				}
				if !ok {
					return nil, widens(parent, boundResources, "resource wildcard of kind %s", s.Kind)
				}
			} else if !parent.coversResource(s.Kind, id) {
				return nil, widens(parent, boundResources, "resource %s:%s", s.Kind, id)
			}
		}
	}
	if child.ExpiresAt > parent.ExpiresAt {
		return nil, widens(parent, boundExpiry, "expiry")
	}
	if child.NotBefore < parent.NotBefore {
		return nil, widens(parent, boundNotBefore, "not_before")
	}
	if parent.MaxUses != nil {
		used, err := h.usedBy(ctx, h.st.db, parent.ID)
		if err != nil {
			return nil, deny(403, "authority_missing", "authorization_denied", 0, "the uses of grant %s cannot be read", parent.ID)
		}
		left := max(*parent.MaxUses-used, 0)
		switch {
		case child.MaxUses == nil:
			child.MaxUses = &left
		case *child.MaxUses > left:
			d := widens(parent, boundMaxUses, "use count: %d asked, %d left", *child.MaxUses, left)
			d.Detail["uses_left"] = left
			return nil, d
		}
	}
	return child, nil
}

// migrateV2 upgrades a version 1 store: grants get a use count and the
// uses charged to them get a table.
const migrateV2 = `
ALTER TABLE grants ADD COLUMN max_uses INTEGER;
CREATE TABLE IF NOT EXISTS grant_uses (
  grant_id TEXT NOT NULL,
  operation_id TEXT NOT NULL,
  at INTEGER NOT NULL,
  PRIMARY KEY (grant_id, operation_id)
);
`
