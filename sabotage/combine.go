package sabotage

import (
	"strings"

	agtp "github.com/parley-conformance/parley/wire/agtp"
)

// Combine is one host that behaves as every rule says at once, in the
// order given: each configuration change applies in turn; a request goes
// through each rule's Intercept (and AGTPRequest) in turn until one
// answers instead of the host; an answer goes through each rule's rewrite
// in turn; a stream frame goes through each Stream, the frames one returns
// fed to the next. Faithful readings that make independent choices are
// combined so that one run of a family's spec profiles tries them all
// (sabotage/fairness).
func Combine(rules ...Rule) Rule {
	var keys, broken []string
	for _, r := range rules {
		keys = append(keys, r.Key())
		broken = append(broken, r.Broken)
	}
	c := Rule{ID: strings.Join(keys, "+"), Broken: strings.Join(broken, "; and ")}
	for _, r := range rules {
		if r.Config != nil {
			c.Config = chainConfig(c.Config, r.Config)
		}
		if r.Intercept != nil {
			c.Intercept = chainIntercept(c.Intercept, r.Intercept)
		}
		if r.Response != nil {
			c.Response = chainResponse(c.Response, r.Response)
		}
		if r.Logs != nil {
			c.Logs = chainLogs(c.Logs, r.Logs)
		}
		if r.Stream != nil {
			c.Stream = chainStream(c.Stream, r.Stream)
		}
		if r.AGTPRequest != nil {
			c.AGTPRequest = chainAGTPRequest(c.AGTPRequest, r.AGTPRequest)
		}
		if r.AGTP != nil {
			c.AGTP = chainAGTP(c.AGTP, r.AGTP)
		}
	}
	return c
}

func chainConfig(a, b func(map[string]map[string]any)) func(map[string]map[string]any) {
	if a == nil {
		return b
	}
	return func(c map[string]map[string]any) { a(c); b(c) }
}

func chainIntercept(a, b func(*Exchange) *Response) func(*Exchange) *Response {
	if a == nil {
		return b
	}
	return func(x *Exchange) *Response {
		if r := a(x); r != nil {
			return r
		}
		return b(x)
	}
}

func chainResponse(a, b func(*Exchange, *Response)) func(*Exchange, *Response) {
	if a == nil {
		return b
	}
	return func(x *Exchange, r *Response) { a(x, r); b(x, r) }
}

func chainLogs(a, b func([]string) []string) func([]string) []string {
	if a == nil {
		return b
	}
	return func(lines []string) []string { return b(a(lines)) }
}

func chainStream(a, b func(*Exchange, []byte) [][]byte) func(*Exchange, []byte) [][]byte {
	if a == nil {
		return b
	}
	return func(x *Exchange, frame []byte) [][]byte {
		var out [][]byte
		for _, f := range a(x, frame) {
			out = append(out, b(x, f)...)
		}
		return out
	}
}

func chainAGTPRequest(a, b func(*AGTPExchange) *agtp.Response) func(*AGTPExchange) *agtp.Response {
	if a == nil {
		return b
	}
	return func(x *AGTPExchange) *agtp.Response {
		if r := a(x); r != nil {
			return r
		}
		return b(x)
	}
}

func chainAGTP(a, b func(*AGTPExchange, *agtp.Response)) func(*AGTPExchange, *agtp.Response) {
	if a == nil {
		return b
	}
	return func(x *AGTPExchange, r *agtp.Response) { a(x, r); b(x, r) }
}
