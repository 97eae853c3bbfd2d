// Package notation turns the fixture notation of scenarios/agl-checker
// (*.agl: one statement per line, blocks in braces) into agl-workflow/1
// documents, with the span of every node and expression taken from where it
// stands in the text. It is the suite's own authoring aid for its fixtures
// (parley sends the JSON, never the notation), so a fixture reads like a
// program and its spans point at real places in it.
//
// A file is a header, a line "begin", and a body:
//
//	workflow NAME
//	use email                                   standard declarations (email.prelude), those the body uses
//	authority mailbox, account
//	ceiling external_write, email_send, human
//	param d: handle email_draft Draft
//	param flag: bool
//	param p: permit mail.send_email binds draft=d
//	declare op {JSON}                           an extra operation (or: declare protocol, declare agent)
//	begin
//	call OP(in: EXPR, ...) [with EXPR] [-> NAME | -> {field: NAME, ...}]
//	propose OP(in: EXPR, ...) -> NAME
//	request_approval EXPR [-> NAME | -> {field: NAME}]
//	let NAME[: TYPE] = EXPR
//	if EXPR { ... } else { ... }
//	match EXPR {  TAG [{field: NAME}] => { ... }  }
//	loop [over EXPR as NAME] { ... }
//	retry N { ... }
//	try { ... } catch TAG [{field: NAME}] { ... }
//	fallback NAME = FIELD of call OP(...) [with EXPR] else EXPR
//	fallback NAME = FIELD of request_approval EXPR else EXPR
//	parallel { branch { ... } branch { ... } }      (race likewise)
//	parallel_map EXPR as NAME { ... }
//	agent NAME(EXPR, ...) [-> NAME]
//	return [EXPR]
//
// An expression is a name, a JSON string, number, true, false, or a JSON
// array. Lines starting with # are comments. A closing brace stands on its
// own line, possibly followed by else or catch.
package notation

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

//go:embed email.prelude
var emailPrelude []byte

type span struct{ Line, Col, EndLine, EndCol int }

func (s span) json() map[string]any {
	return map[string]any{"line": s.Line, "col": s.Col, "end_line": s.EndLine, "end_col": s.EndCol}
}

type tok struct {
	s        string
	col, end int  // 1-based, end exclusive
	kind     byte // i ident, s string, n number, j json array, p punctuation
}

type line struct {
	n    int
	toks []tok
	text string
}

func (l line) span() span {
	if len(l.toks) == 0 {
		return span{l.n, 1, l.n, 1}
	}
	return span{l.n, l.toks[0].col, l.n, l.toks[len(l.toks)-1].end}
}

func tokenize(n int, text string) ([]tok, error) {
	var out []tok
	r := []rune(text)
	for i := 0; i < len(r); {
		ch := r[i]
		switch {
		case ch == ' ' || ch == '\t':
			i++
		case ch == '"':
			j := i + 1
			for j < len(r) && r[j] != '"' {
				if r[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(r) {
				return nil, fmt.Errorf("line %d: unterminated string", n)
			}
			out = append(out, tok{string(r[i : j+1]), i + 1, j + 2, 's'})
			i = j + 1
		case ch == '[':
			depth, j := 0, i
			for ; j < len(r); j++ {
				if r[j] == '[' {
					depth++
				}
				if r[j] == ']' {
					depth--
					if depth == 0 {
						break
					}
				}
			}
			if j >= len(r) {
				return nil, fmt.Errorf("line %d: unterminated array", n)
			}
			out = append(out, tok{string(r[i : j+1]), i + 1, j + 2, 'j'})
			i = j + 1
		case ch == '-' && i+1 < len(r) && r[i+1] == '>', ch == '=' && i+1 < len(r) && r[i+1] == '>':
			out = append(out, tok{string(r[i : i+2]), i + 1, i + 3, 'p'})
			i += 2
		case strings.ContainsRune("(){},:=", ch):
			out = append(out, tok{string(ch), i + 1, i + 2, 'p'})
			i++
		case ch == '-' || (ch >= '0' && ch <= '9'):
			j := i + 1
			for j < len(r) && strings.ContainsRune("0123456789.eE+-", r[j]) {
				j++
			}
			out = append(out, tok{string(r[i:j]), i + 1, j + 1, 'n'})
			i = j
		default:
			j := i
			for j < len(r) && (r[j] == '_' || r[j] == '.' || (r[j] >= 'a' && r[j] <= 'z') || (r[j] >= 'A' && r[j] <= 'Z') || (r[j] >= '0' && r[j] <= '9')) {
				j++
			}
			if j == i {
				return nil, fmt.Errorf("line %d col %d: unexpected %q", n, i+1, ch)
			}
			out = append(out, tok{string(r[i:j]), i + 1, j + 1, 'i'})
			i = j
		}
	}
	return out, nil
}

// Convert turns a fixture in the notation into an agl-workflow/1 document.
func Convert(src string) ([]byte, error) {
	p := &parser{}
	raw := strings.Split(strings.TrimRight(src, "\n"), "\n")
	for i, text := range raw {
		t := strings.TrimSpace(text)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		toks, err := tokenize(i+1, text)
		if err != nil {
			return nil, err
		}
		p.lines = append(p.lines, line{n: i + 1, toks: toks, text: t})
	}
	doc, err := p.document(len(raw), len([]rune(raw[len(raw)-1]))+1)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	// Spans and expressions on one line each, so that a fixture reads.
	b = spanPattern.ReplaceAll(b, []byte(`{"line": $4, "col": $1, "end_line": $3, "end_col": $2}`))
	b = varPattern.ReplaceAll(b, []byte(`{"var": $2, "span": $1}`))
	b = litPattern.ReplaceAll(b, []byte(`{"lit": $1, "span": $2}`))
	return b, nil
}

var (
	spanPattern = regexp.MustCompile(`\{\s*"col": (\d+),\s*"end_col": (\d+),\s*"end_line": (\d+),\s*"line": (\d+)\s*\}`)
	varPattern  = regexp.MustCompile(`\{\s*"span": (\{[^{}\n]*\}),\s*"var": ("[^"\n]*")\s*\}`)
	litPattern  = regexp.MustCompile(`\{\s*"lit": ([^\n\[\{]*?),\s*"span": (\{[^{}\n]*\})\s*\}`)
)

type parser struct {
	lines []line
	pos   int
	used  map[string]bool // operations and agents the body names
}

func (p *parser) errf(l line, format string, a ...any) error {
	return fmt.Errorf("line %d: %s: %s", l.n, fmt.Sprintf(format, a...), l.text)
}

func (p *parser) document(lastLine, lastCol int) (map[string]any, error) {
	doc := map[string]any{"ir_version": "agl-workflow/1", "protocols": []any{}, "operations": []any{}, "agents": []any{},
		"authority": []any{}, "effect_ceiling": []any{}, "params": []any{}}
	p.used = map[string]bool{}
	var prelude *span
	var extraOps, extraProtos, extraAgents []any
	for ; p.pos < len(p.lines); p.pos++ {
		l := p.lines[p.pos]
		kw := l.toks[0].s
		rest := strings.TrimSpace(strings.TrimPrefix(l.text, kw))
		if kw == "begin" {
			p.pos++
			break
		}
		switch kw {
		case "workflow":
			doc["name"] = rest
		case "source":
			doc["source"] = rest
		case "use":
			if rest != "email" {
				return nil, p.errf(l, "unknown prelude")
			}
			s := l.span()
			prelude = &s
		case "authority":
			doc["authority"] = list(rest)
		case "ceiling":
			doc["effect_ceiling"] = list(rest)
		case "param":
			pm, err := p.param(l, rest)
			if err != nil {
				return nil, err
			}
			doc["params"] = append(doc["params"].([]any), pm)
		case "declare":
			what, js, _ := strings.Cut(rest, " ")
			var m map[string]any
			if err := json.Unmarshal([]byte(js), &m); err != nil {
				return nil, p.errf(l, "declaration JSON: %v", err)
			}
			m["span"] = l.span().json()
			switch what {
			case "op":
				extraOps = append(extraOps, m)
			case "protocol":
				extraProtos = append(extraProtos, m)
			case "agent":
				extraAgents = append(extraAgents, m)
			default:
				return nil, p.errf(l, "declare op, protocol or agent")
			}
		default:
			return nil, p.errf(l, "unknown header line")
		}
	}
	body, end, err := p.block(false)
	if err != nil {
		return nil, err
	}
	if end != nil {
		return nil, p.errf(*end, "unbalanced }")
	}
	doc["body"] = body
	doc["span"] = span{1, 1, lastLine, lastCol}.json()
	if prelude != nil {
		var std struct {
			Protocols  []map[string]any `json:"protocols"`
			Operations []map[string]any `json:"operations"`
			Agents     []map[string]any `json:"agents"`
		}
		if err := json.Unmarshal(emailPrelude, &std); err != nil {
			return nil, err
		}
		ops, agents, protos := []any{}, []any{}, []any{}
		for _, a := range std.Agents {
			if p.used["agent:"+a["name"].(string)] {
				a["span"] = prelude.json()
				agents = append(agents, a)
				for _, t := range a["tools"].([]any) {
					p.used["op:"+t.(string)] = true
				}
			}
		}
		for _, pm := range doc["params"].([]any) {
			if t, ok := pm.(map[string]any)["type"].(map[string]any); ok {
				if op, ok := t["permit"].(string); ok {
					p.used["op:"+op] = true
				}
				if k, ok := t["handle"].(string); ok {
					p.used["proto:"+k] = true
				}
			}
		}
		for _, o := range std.Operations {
			if p.used["op:"+o["name"].(string)] {
				o["span"] = prelude.json()
				ops = append(ops, o)
				raw, _ := json.Marshal(o)
				for _, pr := range std.Protocols {
					if strings.Contains(string(raw), `"handle":"`+pr["kind"].(string)+`"`) {
						p.used["proto:"+pr["kind"].(string)] = true
					}
				}
			}
		}
		for _, pr := range std.Protocols {
			if p.used["proto:"+pr["kind"].(string)] {
				pr["span"] = prelude.json()
				protos = append(protos, pr)
			}
		}
		doc["protocols"], doc["operations"], doc["agents"] = protos, ops, agents
	}
	doc["protocols"] = append(doc["protocols"].([]any), extraProtos...)
	doc["operations"] = append(doc["operations"].([]any), extraOps...)
	doc["agents"] = append(doc["agents"].([]any), extraAgents...)
	for _, k := range []string{"protocols", "operations", "agents"} {
		if doc[k] == nil {
			doc[k] = []any{}
		}
	}
	if doc["name"] == nil {
		return nil, fmt.Errorf("no workflow name")
	}
	return doc, nil
}

func list(s string) []any {
	out := []any{}
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

func (p *parser) param(l line, rest string) (map[string]any, error) {
	name, typ, ok := strings.Cut(rest, ":")
	if !ok {
		return nil, p.errf(l, "param NAME: TYPE")
	}
	f := strings.Fields(typ)
	pm := map[string]any{"name": strings.TrimSpace(name), "span": l.span().json()}
	switch {
	case len(f) >= 3 && f[0] == "handle":
		pm["type"] = map[string]any{"handle": f[1]}
		pm["state"] = f[2]
	case len(f) >= 2 && f[0] == "permit":
		pm["type"] = map[string]any{"permit": f[1]}
		if len(f) >= 4 && f[2] == "binds" {
			b := map[string]any{}
			for _, kv := range strings.Split(strings.Join(f[3:], ""), ",") {
				k, v, _ := strings.Cut(kv, "=")
				b[k] = v
			}
			pm["binds"] = b
		}
	case len(f) == 1:
		pm["type"] = f[0]
	default:
		return nil, p.errf(l, "unknown parameter type")
	}
	return pm, nil
}

// block parses statements up to a line that starts with "}" (returned, not
// consumed past) or the end.
func (p *parser) block(inner bool) ([]any, *line, error) {
	out := []any{}
	for p.pos < len(p.lines) {
		l := p.lines[p.pos]
		if l.toks[0].s == "}" {
			if !inner {
				return nil, &l, nil
			}
			return out, &l, nil
		}
		st, err := p.stmt()
		if err != nil {
			return nil, nil, err
		}
		out = append(out, st)
	}
	if inner {
		return nil, nil, fmt.Errorf("end of file inside a block")
	}
	return out, nil, nil
}

// closeBlock parses a braced block whose opening brace ended the current
// line; it returns the block and the closing line (already consumed).
func (p *parser) closeBlock() ([]any, line, error) {
	p.pos++
	body, end, err := p.block(true)
	if err != nil {
		return nil, line{}, err
	}
	p.pos++
	return body, *end, nil
}

func endSpan(start line, end line) span {
	closing := end.toks[len(end.toks)-1]
	return span{start.n, start.toks[0].col, end.n, closing.end}
}

// cursor reads the tokens of one line.
type cursor struct {
	p   *parser
	l   line
	i   int
	err error
}

func (c *cursor) peek() tok {
	if c.i < len(c.l.toks) {
		return c.l.toks[c.i]
	}
	return tok{}
}

func (c *cursor) next() tok {
	t := c.peek()
	if c.i < len(c.l.toks) {
		c.i++
	}
	return t
}

func (c *cursor) fail(format string, a ...any) {
	if c.err == nil {
		c.err = c.p.errf(c.l, format, a...)
	}
}

func (c *cursor) expect(s string) tok {
	t := c.next()
	if t.s != s {
		c.fail("expected %q, found %q", s, t.s)
	}
	return t
}

func (c *cursor) ident() tok {
	t := c.next()
	if t.kind != 'i' {
		c.fail("expected a name, found %q", t.s)
	}
	return t
}

func (c *cursor) done() bool { return c.i >= len(c.l.toks) }

func (c *cursor) expr() map[string]any {
	t := c.next()
	sp := span{c.l.n, t.col, c.l.n, t.end}.json()
	switch t.kind {
	case 'i':
		switch t.s {
		case "true", "false":
			return map[string]any{"lit": t.s == "true", "span": sp}
		}
		return map[string]any{"var": t.s, "span": sp}
	case 's', 'n', 'j':
		var v any
		if err := json.Unmarshal([]byte(t.s), &v); err != nil {
			c.fail("bad literal %s", t.s)
		}
		if t.kind == 'n' {
			v = json.Number(t.s)
		}
		return map[string]any{"lit": v, "span": sp}
	}
	c.fail("expected an expression, found %q", t.s)
	return map[string]any{"var": "?"}
}

// args reads "(name: expr, ...)".
func (c *cursor) args() map[string]any {
	out := map[string]any{}
	c.expect("(")
	for c.peek().s != ")" && !c.done() {
		n := c.ident()
		c.expect(":")
		out[n.s] = c.expr()
		if c.peek().s == "," {
			c.next()
		}
	}
	c.expect(")")
	return out
}

// bindsNext reports whether a "{field: NAME}" bind follows (rather than the
// brace that opens a block).
func (c *cursor) bindsNext() bool {
	t := c.l.toks
	return c.peek().s == "{" && c.i+2 < len(t) && t[c.i+1].kind == 'i' && t[c.i+2].s == ":"
}

// bind reads "NAME" or "{field: NAME, ...}".
func (c *cursor) bind() any {
	if c.peek().s != "{" {
		return c.ident().s
	}
	c.next()
	m := map[string]any{}
	for c.peek().s != "}" && !c.done() {
		f := c.ident()
		c.expect(":")
		m[f.s] = c.ident().s
		if c.peek().s == "," {
			c.next()
		}
	}
	c.expect("}")
	return m
}

func (p *parser) stmt() (map[string]any, error) {
	l := p.lines[p.pos]
	c := &cursor{p: p, l: l}
	kw := c.ident().s
	st := map[string]any{"kind": kw}
	simple := func() (map[string]any, error) {
		if !c.done() && c.err == nil {
			c.fail("unexpected %q", c.peek().s)
		}
		if c.err != nil {
			return nil, c.err
		}
		st["span"] = l.span().json()
		p.pos++
		return st, nil
	}
	call := func(st map[string]any) {
		op := c.ident().s
		p.used["op:"+op] = true
		st["op"] = op
		st["args"] = c.args()
		if c.peek().s == "with" {
			c.next()
			st["permit"] = c.expr()
		}
	}
	switch kw {
	case "call":
		call(st)
		if c.peek().s == "->" {
			c.next()
			st["bind"] = c.bind()
		}
		return simple()
	case "propose":
		op := c.ident().s
		p.used["op:"+op] = true
		st["op"] = op
		st["args"] = c.args()
		if c.peek().s == "->" {
			c.next()
			st["bind"] = c.ident().s
		}
		return simple()
	case "request_approval":
		st["proposal"] = c.expr()
		if c.peek().s == "->" {
			c.next()
			st["bind"] = c.bind()
		}
		return simple()
	case "let":
		st["bind"] = c.ident().s
		if c.peek().s == ":" {
			c.next()
			t := c.ident().s
			switch t {
			case "handle", "permit", "proposal":
				st["type"] = map[string]any{t: c.ident().s}
			default:
				st["type"] = t
			}
		}
		c.expect("=")
		st["value"] = c.expr()
		return simple()
	case "return":
		if !c.done() {
			st["value"] = c.expr()
		}
		return simple()
	case "agent":
		a := c.ident().s
		p.used["agent:"+a] = true
		st["agent"] = a
		c.expect("(")
		in := []any{}
		for c.peek().s != ")" && !c.done() {
			in = append(in, c.expr())
			if c.peek().s == "," {
				c.next()
			}
		}
		c.expect(")")
		st["input"] = in
		if c.peek().s == "->" {
			c.next()
			st["bind"] = c.ident().s
		}
		return simple()
	case "fallback":
		st["bind"] = c.ident().s
		c.expect("=")
		st["field"] = c.ident().s
		c.expect("of")
		start := c.peek()
		prim := map[string]any{}
		switch c.ident().s {
		case "call":
			prim["kind"] = "call"
			call(prim)
		case "request_approval":
			prim["kind"] = "request_approval"
			prim["proposal"] = c.expr()
		default:
			c.fail("a fallback's primary is a call or a request_approval")
		}
		prev := c.l.toks[c.i-1]
		prim["span"] = span{l.n, start.col, l.n, prev.end}.json()
		st["primary"] = prim
		c.expect("else")
		st["otherwise"] = c.expr()
		return simple()
	case "if":
		st["cond"] = c.expr()
		c.expect("{")
		if c.err != nil {
			return nil, c.err
		}
		then, end, err := p.closeBlock()
		if err != nil {
			return nil, err
		}
		st["then"] = then
		if len(end.toks) > 1 && end.toks[1].s == "else" {
			p.pos--
			els, e2, err := p.closeBlock()
			if err != nil {
				return nil, err
			}
			st["else"] = els
			end = e2
		}
		st["span"] = endSpan(l, end).json()
		return st, nil
	case "loop", "parallel_map", "retry":
		switch {
		case kw == "retry":
			n := c.next()
			v, err := strconv.Atoi(n.s)
			if err != nil {
				c.fail("retry N")
			}
			st["attempts"] = v
		case kw == "parallel_map":
			st["over"] = c.expr()
			c.expect("as")
			st["item"] = c.ident().s
		case c.peek().s == "over":
			c.next()
			st["over"] = c.expr()
			c.expect("as")
			st["item"] = c.ident().s
		}
		c.expect("{")
		if c.err != nil {
			return nil, c.err
		}
		body, end, err := p.closeBlock()
		if err != nil {
			return nil, err
		}
		st["body"] = body
		st["span"] = endSpan(l, end).json()
		return st, nil
	case "try":
		c.expect("{")
		if c.err != nil {
			return nil, c.err
		}
		body, end, err := p.closeBlock()
		if err != nil {
			return nil, err
		}
		st["body"] = body
		catches := []any{}
		for len(end.toks) > 1 && end.toks[1].s == "catch" {
			cc := &cursor{p: p, l: end, i: 2}
			tag := cc.ident()
			arm := map[string]any{"tag": tag.s}
			if cc.bindsNext() {
				arm["bind"] = cc.bind()
			}
			cc.expect("{")
			if cc.err != nil {
				return nil, cc.err
			}
			p.pos--
			ab, e2, err := p.closeBlock()
			if err != nil {
				return nil, err
			}
			arm["body"] = ab
			arm["span"] = span{end.n, tag.col, e2.n, e2.toks[0].end}.json()
			catches = append(catches, arm)
			end = e2
		}
		st["catch"] = catches
		st["span"] = endSpan(l, end).json()
		return st, nil
	case "match":
		st["on"] = c.expr()
		c.expect("{")
		if c.err != nil {
			return nil, c.err
		}
		p.pos++
		arms := []any{}
		for {
			if p.pos >= len(p.lines) {
				return nil, p.errf(l, "unterminated match")
			}
			al := p.lines[p.pos]
			if al.toks[0].s == "}" {
				p.pos++
				st["arms"] = arms
				st["span"] = endSpan(l, al).json()
				return st, nil
			}
			ac := &cursor{p: p, l: al}
			tag := ac.ident()
			arm := map[string]any{"tag": tag.s}
			if ac.bindsNext() {
				arm["bind"] = ac.bind()
			}
			ac.expect("=>")
			ac.expect("{")
			if ac.err != nil {
				return nil, ac.err
			}
			ab, e2, err := p.closeBlock()
			if err != nil {
				return nil, err
			}
			arm["body"] = ab
			arm["span"] = endSpan(al, e2).json()
			arms = append(arms, arm)
		}
	case "parallel", "race":
		c.expect("{")
		if c.err != nil {
			return nil, c.err
		}
		p.pos++
		branches := []any{}
		for {
			if p.pos >= len(p.lines) {
				return nil, p.errf(l, "unterminated %s", kw)
			}
			bl := p.lines[p.pos]
			if bl.toks[0].s == "}" {
				p.pos++
				st["branches"] = branches
				st["span"] = endSpan(l, bl).json()
				return st, nil
			}
			bc := &cursor{p: p, l: bl}
			bc.expect("branch")
			bc.expect("{")
			if bc.err != nil {
				return nil, bc.err
			}
			bb, e2, err := p.closeBlock()
			if err != nil {
				return nil, err
			}
			branches = append(branches, map[string]any{"body": bb, "span": endSpan(bl, e2).json()})
		}
	}
	return nil, p.errf(l, "unknown statement %q", kw)
}

// Sorted returns the keys of m in order (for callers that list fixtures).
func Sorted(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// EmailPrelude returns the standard declarations "use email" draws from
// (protocols, operations and agents, without spans).
func EmailPrelude() []byte { return append([]byte(nil), emailPrelude...) }
