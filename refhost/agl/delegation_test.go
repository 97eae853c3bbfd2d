package agl

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStoreMigratesV1: a store written by a host of schema version 1 (no
// use counts) opens under version 2 with its grants intact, gains
// max_uses and grant_uses, and counts uses from then on.
func TestStoreMigratesV1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	_, err = db.Exec(schemaSQL)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO meta(k,v) VALUES('schema_version','1'); PRAGMA user_version = 1`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO grants(id,token_hash,issuer,subject,operations,resources,not_before,expires_at,created_at)
		VALUES('grant_old','h1','authz','alice','["op"]','[]',0,9999999999999,0)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	s, err := initStore(path, time.Second)
	require.NoError(t, err)
	ctx := context.Background()
	var v int
	require.NoError(t, s.db.QueryRow(`PRAGMA user_version`).Scan(&v))
	require.Equal(t, schemaVersion, v)
	require.Equal(t, 2, v)
	var meta string
	require.NoError(t, s.db.QueryRow(`SELECT v FROM meta WHERE k='schema_version'`).Scan(&meta))
	require.Equal(t, "2", meta)

	h := &Host{st: s}
	old, err := h.grantByID(ctx, s.db, "grant_old")
	require.NoError(t, err)
	require.Equal(t, "alice", old.Subject)
	require.Nil(t, old.MaxUses, "a grant of version 1 has no use count")

	two := int64(2)
	g := &grantRow{ID: "grant_new", Issuer: "authz", Subject: "bob", Operations: []string{"op"}, Resources: []ResourceScope{},
		ExpiresAt: 9999999999999, MaxUses: &two}
	require.NoError(t, s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.Exec(`INSERT INTO grants(id,token_hash,issuer,subject,operations,resources,not_before,expires_at,created_at,max_uses)
			VALUES(?,?,?,?,?,?,?,?,?,?)`, g.ID, "h2", g.Issuer, g.Subject, `["op"]`, `[]`, 0, g.ExpiresAt, 0, 2); err != nil {
			return err
		}
		return h.chargeUses(ctx, tx, g, "op_1")
	}))
	n, err := h.usedBy(ctx, s.db, "grant_new")
	require.NoError(t, err)
	require.EqualValues(t, 1, n)

	// Opening it again runs nothing: the version says it is current.
	require.NoError(t, s.close())
	s2, err := initStore(path, time.Second)
	require.NoError(t, err)
	require.NoError(t, s2.close())
}

// boundedGrant replaces the scenario's grant with one of n uses.
func boundedGrant(t *testing.T, c *client, s *scenario, n int) {
	t.Helper()
	r := c.do("POST", "/agl/v1/grants", testKeys.Authority, map[string]any{
		"subject": s.principal, "operations": []string{sendOp}, "ttl_seconds": 3600, "max_uses": n,
		"resources": []any{map[string]any{"kind": "mailbox", "ids": []string{s.mailbox}}}})
	require.Equal(t, 201, r.Status, string(r.Raw))
	s.grantID, s.grantToken = r.str("grant_id"), r.str("grant_token")
}

// TestLastUseIsClaimedOnce: two dispatches racing for a grant's last use
// (each with its own approved permit) are serialized by the claim
// transaction: one is sent, the other is refused naming the count.
func TestLastUseIsClaimedOnce(t *testing.T) {
	th := newTestHost(t, nil)
	c := th.c
	registerAll(t, c)
	s := newScenario(t, c, []string{sendOp})
	boundedGrant(t, c, s, 1)
	var args [2]map[string]any
	var permits [2]string
	for i := range 2 {
		_, h := s.draft(t)
		args[i] = map[string]any{"draft": h}
		_, permits[i], _ = s.approve(t, sendOp, args[i], "operator")
	}
	gate := make(chan struct{})
	var res [2]resp
	done := make(chan int)
	for i := range 2 {
		go func() {
			<-gate
			res[i] = s.dispatch(sendOp, args[i], permits[i])
			done <- i
		}()
	}
	close(gate)
	<-done
	<-done
	statuses := []int{res[0].Status, res[1].Status}
	require.ElementsMatch(t, []int{200, 403}, statuses, "%s / %s", res[0].Raw, res[1].Raw)
	refused := res[0]
	if res[1].Status == 403 {
		refused = res[1]
	}
	require.Equal(t, "grant_uses_exhausted", refused.code())
	require.Equal(t, "max_uses", refused.str("error", "detail", "bound"))
	require.Equal(t, s.grantID, refused.str("error", "detail", "grant_id"))
	require.Equal(t, 1, th.email.Count())
	g := c.do("GET", "/agl/v1/grants/"+s.grantID, testKeys.Operator, nil)
	require.EqualValues(t, "1", fmt.Sprint(g.Body["uses"]))
}

// TestDelegateSpendsItsDelegatorsUses: a delegation inherits what its
// parent has left, cannot ask for more, and its use is the parent's: the
// parent is then refused naming itself, and nothing more is sent.
func TestDelegateSpendsItsDelegatorsUses(t *testing.T) {
	th := newTestHost(t, nil)
	c := th.c
	registerAll(t, c)
	s := newScenario(t, c, []string{sendOp})
	boundedGrant(t, c, s, 1)
	body := map[string]any{"subject": s.principal + "-helper", "operations": []string{sendOp}, "ttl_seconds": 60,
		"resources": []any{map[string]any{"kind": "mailbox", "ids": []string{s.mailbox}}}}
	body["max_uses"] = 2
	r := c.do("POST", "/agl/v1/grants/"+s.grantID+"/delegations", s.grantToken, body)
	require.Equal(t, 403, r.Status, string(r.Raw))
	require.Equal(t, "max_uses", r.str("error", "detail", "bound"))
	delete(body, "max_uses")
	r = c.do("POST", "/agl/v1/grants/"+s.grantID+"/delegations", s.grantToken, body)
	require.Equal(t, 201, r.Status, string(r.Raw))
	require.Equal(t, "1", fmt.Sprint(r.Body["max_uses"]), "inherits what the parent has left")

	helper := &scenario{c: c, principal: s.principal + "-helper", agent: s.agent + "-helper", exec: s.exec, mailbox: s.mailbox,
		grantID: r.str("grant_id"), grantToken: r.str("grant_token")}
	require.Equal(t, 200, c.do("PUT", "/agl/v1/agents/"+helper.agent, testKeys.Operator, map[string]any{
		"principal": helper.principal, "tools": []string{sendOp}, "effect_ceiling": []string{"external_write", "email_send"}}).Status)
	_, h := helper.draft(t)
	_, permit, _ := helper.approve(t, sendOp, map[string]any{"draft": h}, "operator")
	require.Equal(t, 200, helper.dispatch(sendOp, map[string]any{"draft": h}, permit).Status)

	_, h2 := s.draft(t)
	_, permit2, _ := s.approve(t, sendOp, map[string]any{"draft": h2}, "operator")
	r = s.dispatch(sendOp, map[string]any{"draft": h2}, permit2)
	require.Equal(t, 403, r.Status, string(r.Raw))
	require.Equal(t, "grant_uses_exhausted", r.code())
	require.Equal(t, s.grantID, r.str("error", "detail", "grant_id"))
	require.Equal(t, 1, th.email.Count())
}

// TestTwoHostsMigrateOneStore: two hosts opening the same version 1 store
// at once both open it; the second finds it migrated under the write lock
// and does not add the column again.
func TestTwoHostsMigrateOneStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	// As a version 1 host left it: in WAL mode, schema version 1.
	_, err = db.Exec(`PRAGMA journal_mode=WAL; ` + schemaSQL + `; PRAGMA user_version = 1`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	errs := make(chan error, 2)
	gate := make(chan struct{})
	for range 2 {
		go func() {
			<-gate
			s, err := initStore(path, 5*time.Second)
			if err == nil {
				err = s.close()
			}
			errs <- err
		}()
	}
	close(gate)
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
}
