package steps

import "testing"

// A status mismatch names what the host sent and what was expected, with
// reason phrases, not only "expected status N".
func TestUnexpectedNamesBothStatuses(t *testing.T) {
	r := &Response{Method: "POST", URL: "/v1/preflight", Status: 200, Body: []byte(` {"ok":true} `)}
	want := `POST /v1/preflight answered 200 OK where 201 Created was expected: {"ok":true}`
	if got := r.Unexpected(201); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	r = &Response{Method: "BOOK", URL: "/rooms", Status: 463}
	want = "BOOK /rooms answered 463 where 201 Created or 202 Accepted was expected"
	if got := r.Unexpected(201, 202); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
