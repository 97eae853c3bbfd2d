package agl

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"time"
)

// The barrier seam makes contenders meet. A scenario about a race (one
// permit dispatched many times at once, one revision proposed many times,
// a dispatch racing an edit) arms it before firing its requests: each
// request that reaches an armed point (just before the claim transaction,
// the proposal transaction or the edit transaction, after every check made
// outside them) waits there until the given number of parties has arrived,
// and then all go on together. Whether the race interleaves is then no
// longer left to chance: a host whose transaction lacks the guard lets every
// contender through, every time.
//
// The barrier lives in the operation store, so hosts sharing a store meet
// at one barrier; only hosts with their seams mounted consult it.
//
// A barrier armed with a resource_id holds only the requests about that
// resource (claims of an operation on it, proposals of it, edits of it), so
// that several races on one host, each about its own draft, do not meet one
// another; one armed without it holds every request at its points. One of
// each may be armed at once.

const (
	pointClaim   = "claim"
	pointPropose = "propose"
	pointEdit    = "edit"
)

type barrierBody struct {
	Points     []string `json:"points"`
	Parties    int      `json:"parties"`
	TimeoutMS  int      `json:"timeout_ms,omitempty"`
	ResourceID string   `json:"resource_id,omitempty"`
}

// barrierID is the row a barrier is kept in: one for the whole host, one
// per resource.
func barrierID(resourceID string) string {
	if resourceID == "" {
		return "barrier"
	}
	return "resource:" + resourceID
}

// meet waits at point while an armed barrier (the host's, or the one of the
// resource the request is about) names it and has not yet seen all its
// parties. It never fails the request: a barrier that times out lets
// everyone through.
func (h *Host) meet(ctx context.Context, point, resourceID string) {
	if !h.seamsMounted.Load() {
		return
	}
	var armed int
	if h.st.db.QueryRowContext(ctx, `SELECT count(*) FROM seam_barriers`).Scan(&armed); armed == 0 {
		return
	}
	var points, id string
	var parties, arrived int
	var deadline int64
	err := h.st.tx(ctx, func(tx *sql.Tx) error {
		ids := []string{barrierID("")}
		if resourceID != "" {
			ids = append([]string{barrierID(resourceID)}, ids...)
		}
		for _, id = range ids {
			err := tx.QueryRow(`SELECT points, parties, arrived, deadline FROM seam_barriers WHERE id=?`, id).Scan(&points, &parties, &arrived, &deadline)
			if isNoRows(err) {
				continue
			} else if err != nil {
				return err
			}
			var ps []string
			json.Unmarshal([]byte(points), &ps)
			if !contains(ps, point) || arrived >= parties {
				continue
			}
			arrived++
			_, err = tx.Exec(`UPDATE seam_barriers SET arrived=? WHERE id=?`, arrived, id)
			return err
		}
		parties = 0
		return nil
	})
	if err != nil || parties == 0 {
		return
	}
	for arrived < parties && time.Now().UnixMilli() < deadline {
		select {
		case <-ctx.Done():
			return
		case <-h.stop:
			return
		case <-time.After(5 * time.Millisecond):
		}
		if err := h.st.db.QueryRowContext(ctx, `SELECT arrived FROM seam_barriers WHERE id=?`, id).Scan(&arrived); err != nil {
			return
		}
	}
}

func (h *Host) hArmBarrier(w http.ResponseWriter, r *http.Request) {
	var b barrierBody
	if d := decode(r, &b); d != nil {
		writeDenial(w, d)
		return
	}
	for _, p := range b.Points {
		if p != pointClaim && p != pointPropose && p != pointEdit {
			writeDenial(w, deny(422, "schema_error", "schema_error", 0, "points are claim, propose and edit"))
			return
		}
	}
	if len(b.Points) == 0 || b.Parties < 2 || b.Parties > 64 {
		writeDenial(w, deny(422, "schema_error", "schema_error", 0, "a barrier needs points and 2 to 64 parties"))
		return
	}
	if b.TimeoutMS <= 0 {
		b.TimeoutMS = 5000
	}
	ps, _ := json.Marshal(b.Points)
	err := h.st.tx(r.Context(), func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO seam_barriers(id,points,parties,arrived,deadline) VALUES(?,?,?,0,?)
			ON CONFLICT(id) DO UPDATE SET points=excluded.points, parties=excluded.parties, arrived=0, deadline=excluded.deadline`,
			barrierID(b.ResourceID), string(ps), b.Parties, time.Now().UnixMilli()+int64(b.TimeoutMS))
		return err
	})
	if err != nil {
		h.fail(w, err)
		return
	}
	out := map[string]any{"points": b.Points, "parties": b.Parties, "timeout_ms": b.TimeoutMS, "arrived": 0}
	if b.ResourceID != "" {
		out["resource_id"] = b.ResourceID
	}
	writeJSON(w, 201, out)
}

func (h *Host) hBarrierState(w http.ResponseWriter, r *http.Request) {
	var points string
	var parties, arrived int
	var deadline int64
	err := h.st.db.QueryRowContext(r.Context(), `SELECT points, parties, arrived, deadline FROM seam_barriers WHERE id=?`, barrierID(r.URL.Query().Get("resource_id"))).Scan(&points, &parties, &arrived, &deadline)
	if isNoRows(err) {
		writeDenial(w, deny(404, "not_found", "request", 0, "no barrier is armed"))
		return
	} else if err != nil {
		h.fail(w, err)
		return
	}
	var ps []string
	json.Unmarshal([]byte(points), &ps)
	writeJSON(w, 200, map[string]any{"points": ps, "parties": parties, "arrived": arrived, "timeout_ms": max(0, deadline-time.Now().UnixMilli())})
}

func (h *Host) hDisarmBarrier(w http.ResponseWriter, r *http.Request) {
	q, args := `DELETE FROM seam_barriers`, []any{}
	if id := r.URL.Query().Get("resource_id"); id != "" {
		q, args = q+` WHERE id=?`, append(args, barrierID(id))
	}
	if _, err := h.st.db.ExecContext(r.Context(), q, args...); err != nil {
		h.fail(w, err)
		return
	}
	w.WriteHeader(204)
}
