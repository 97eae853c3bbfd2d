package sabotage

import "bytes"

// idMap stands ids in for others in whatever text passes a rule: a rule
// that answers with stand-ins for the host's ids (or the host's ids for
// stand-ins) meets every id it has learnt in every answer. One
// bytes.ReplaceAll per learnt id made such a rule's run quadratic (a tenth
// of the fairness test's CPU): UUIDs, which is what hosts issue here, are
// found in one pass over the text and looked up; an id of another shape
// falls back to a replacement of its own.
type idMap struct {
	uuids map[string]string
	other map[string]string
}

func (m *idMap) set(from, to string) {
	if m.uuids == nil {
		m.uuids, m.other = map[string]string{}, map[string]string{}
	}
	if isUUID([]byte(from)) {
		m.uuids[from] = to
	} else {
		m.other[from] = to
	}
}

func (m *idMap) len() int { return len(m.uuids) + len(m.other) }

func (m *idMap) has(from string) bool {
	_, u := m.uuids[from]
	_, o := m.other[from]
	return u || o
}

// apply returns b with every id the map knows replaced by its stand-in (b
// itself when there is none).
func (m *idMap) apply(b []byte) []byte {
	if len(m.uuids) > 0 {
		var out []byte
		last := 0
		for i := 0; i+uuidLen <= len(b); {
			w := b[i : i+uuidLen]
			if w[8] != '-' || w[13] != '-' || !isUUID(w) {
				i++
				continue
			}
			to, ok := m.uuids[string(w)]
			if !ok {
				i++
				continue
			}
			out = append(append(out, b[last:i]...), to...)
			i += uuidLen
			last = i
		}
		if out != nil {
			b = append(out, b[last:]...)
		}
	}
	for from, to := range m.other {
		b = bytes.ReplaceAll(b, []byte(from), []byte(to))
	}
	return b
}

func (m *idMap) applyString(s string) string { return string(m.apply([]byte(s))) }

const uuidLen = 36

// isUUID reports whether b is a UUID in its text form (8-4-4-4-12 hex
// digits, either case).
func isUUID(b []byte) bool {
	if len(b) != uuidLen {
		return false
	}
	for i, c := range b {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
