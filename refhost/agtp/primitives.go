package agtp

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// stepError is a primitive's refusal; it aborts the whole composition (the
// steps of one action run in one transaction).
type stepError struct {
	status int
	reason string
	msg    string
}

func (e *stepError) Error() string { return e.msg }

func keyOf(p Primitive, params map[string]any) (string, error) {
	switch v := params[p.KeyParam].(type) {
	case string:
		if v != "" && len(v) <= 256 {
			return v, nil
		}
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	}
	return "", &stepError{400, "missing-parameter", fmt.Sprintf("primitive %s needs a string parameter %q", p.Name, p.KeyParam)}
}

// runPrimitive executes one registered primitive inside tx.
func runPrimitive(ctx context.Context, tx *sql.Tx, p Primitive, params map[string]any) (any, error) {
	switch p.Kind {
	case "echo":
		return map[string]any{"echo": params}, nil
	case "record.put":
		k, err := keyOf(p, params)
		if err != nil {
			return nil, err
		}
		v, _ := json.Marshal(params)
		if _, err := tx.ExecContext(ctx, `INSERT INTO records (collection, key, value) VALUES (?,?,?) ON CONFLICT(collection, key) DO UPDATE SET value = excluded.value`, p.Collection, k, string(v)); err != nil {
			return nil, err
		}
		return map[string]any{"collection": p.Collection, "key": k, "stored": true}, nil
	case "record.get":
		k, err := keyOf(p, params)
		if err != nil {
			return nil, err
		}
		var v string
		err = tx.QueryRowContext(ctx, `SELECT value FROM records WHERE collection = ? AND key = ?`, p.Collection, k).Scan(&v)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, &stepError{404, "not-found", fmt.Sprintf("no %s record %q", p.Collection, k)}
		}
		if err != nil {
			return nil, err
		}
		return map[string]any{"collection": p.Collection, "key": k, "value": json.RawMessage(v)}, nil
	case "record.delete":
		k, err := keyOf(p, params)
		if err != nil {
			return nil, err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM records WHERE collection = ? AND key = ?`, p.Collection, k)
		if err != nil {
			return nil, err
		}
		n, _ := res.RowsAffected()
		return map[string]any{"collection": p.Collection, "key": k, "deleted": n > 0}, nil
	case "record.list":
		rows, err := tx.QueryContext(ctx, `SELECT key, value FROM records WHERE collection = ? ORDER BY key LIMIT 1000`, p.Collection)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		items := []map[string]any{}
		for rows.Next() {
			var k, v string
			if err := rows.Scan(&k, &v); err != nil {
				return nil, err
			}
			items = append(items, map[string]any{"key": k, "value": json.RawMessage(v)})
		}
		return map[string]any{"collection": p.Collection, "items": items}, rows.Err()
	case "counter.incr":
		var v int64
		err := tx.QueryRowContext(ctx, `INSERT INTO counters (name, value) VALUES (?, 1) ON CONFLICT(name) DO UPDATE SET value = value + 1 RETURNING value`, p.Collection).Scan(&v)
		if err != nil {
			return nil, err
		}
		return map[string]any{"counter": p.Collection, "value": v}, nil
	case "counter.get":
		var v int64
		err := tx.QueryRowContext(ctx, `SELECT value FROM counters WHERE name = ?`, p.Collection).Scan(&v)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
		return map[string]any{"counter": p.Collection, "value": v}, nil
	}
	return nil, &stepError{500, "synthesis-error", "unknown primitive kind " + p.Kind}
}
