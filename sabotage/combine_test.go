package sabotage

import (
	"strings"
	"testing"

	agtp "github.com/parley-conformance/parley/wire/agtp"
)

// TestCombineAppliesEveryRuleInTurn: configuration changes, rewrites and
// frames go through each rule in order; the first rule to answer instead
// of the host answers.
func TestCombineAppliesEveryRuleInTurn(t *testing.T) {
	mark := func(name string) Rule {
		return Rule{ID: name, Broken: "does " + name,
			Config:   func(c map[string]map[string]any) { c["x"]["order"] = c["x"]["order"].(string) + name },
			Response: func(_ *Exchange, r *Response) { r.Body = append(r.Body, name...) },
			Logs:     func(l []string) []string { return append(l, name) },
			Stream: func(_ *Exchange, f []byte) [][]byte {
				return [][]byte{append(append([]byte{}, f...), name...), []byte(name)}
			},
			AGTP: func(_ *AGTPExchange, r *agtp.Response) { r.Reason += name },
			Intercept: func(x *Exchange) *Response {
				if x.Path == "/"+name {
					return &Response{Status: 200, Body: []byte(name)}
				}
				x.Body = append(x.Body, name...)
				return nil
			},
			AGTPRequest: func(x *AGTPExchange) *agtp.Response {
				if x.Request.Path == "/"+name {
					return &agtp.Response{Status: 200, Reason: name}
				}
				return nil
			},
		}
	}
	c := Combine(mark("a"), mark("b"))
	if c.Key() != "a+b" || !strings.Contains(c.Broken, "does a") || !strings.Contains(c.Broken, "does b") {
		t.Errorf("key %q, broken %q", c.Key(), c.Broken)
	}
	cfg := map[string]map[string]any{"x": {"order": ""}}
	c.Config(cfg)
	r := &Response{}
	c.Response(nil, r)
	var frames []string
	for _, f := range c.Stream(nil, []byte("f")) {
		frames = append(frames, string(f))
	}
	ar := &agtp.Response{}
	c.AGTP(nil, ar)
	if got := []string{cfg["x"]["order"].(string), string(r.Body), strings.Join(c.Logs(nil), ","), strings.Join(frames, ","), ar.Reason}; strings.Join(got, "|") != "ab|ab|a,b|fab,b,ab,b|ab" {
		t.Errorf("in turn: %q", got)
	}
	x := &Exchange{Path: "/b"}
	if ans := c.Intercept(x); ans == nil || string(ans.Body) != "b" || string(x.Body) != "a" {
		t.Errorf("the second rule answers after the first rewrote the body: %+v, body %q", ans, x.Body)
	}
	if ans := c.Intercept(&Exchange{Path: "/none"}); ans != nil {
		t.Errorf("no rule answers, yet %+v", ans)
	}
	if ans := c.AGTPRequest(&AGTPExchange{Request: &agtp.Request{Path: "/a"}}); ans == nil || ans.Reason != "a" {
		t.Errorf("the first rule answers: %+v", ans)
	}
}
