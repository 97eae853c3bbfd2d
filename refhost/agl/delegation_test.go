package agl

import (
	"context"
	"database/sql"
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
