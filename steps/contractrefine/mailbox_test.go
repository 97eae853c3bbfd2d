package contractrefine

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/parley-conformance/parley/fixtures"
	"github.com/parley-conformance/parley/steps"
)

func deliver(t *testing.T, h http.Handler, body string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)))
	if rec.Code != http.StatusNoContent {
		t.Fatalf("mailbox answered %d", rec.Code)
	}
}

// A delivery carrying another scenario's marker at a scenario's mailbox is
// another lease's state seen there: a suite fault, never the host's.
func TestMailboxSeesAnotherLeasesDelivery(t *testing.T) {
	m := newMailbox("box1", "/contractrefine/f/box1/", "parley-mine")
	deliver(t, m, `{"text":"parley-mine-call-1","mailbox":"box1"}`)
	got, err := m.carrying("parley-mine-call-1")
	if err != nil || len(got) != 1 {
		t.Fatalf("own delivery: %v, %d", err, len(got))
	}
	deliver(t, m, `{"text":"parley-theirs-call-1","mailbox":"box1"}`)
	_, err = m.carrying("parley-mine-call-1")
	var sf *steps.SuiteFault
	if !errors.As(err, &sf) || !strings.Contains(err.Error(), "another lease's state") {
		t.Fatalf("a foreign delivery was not a suite fault: %v", err)
	}
}

// A delivery reaching a mailbox no scenario holds is a stray on the run's
// fakes, and a scenario reading its deliveries reports it as a suite fault.
func TestUnroutedDeliveryIsASuiteFault(t *testing.T) {
	f, err := fixtures.ServeFakes("")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := strays(f, "contractrefine-advisory"); err != nil {
		t.Fatalf("no stray yet: %v", err)
	}
	resp, err := http.Post(f.URL(fixtures.CRDeliverPath("contractrefine-advisory")+"nobody"), "application/json", strings.NewReader(`{"text":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	err = strays(f, "contractrefine-advisory")
	var sf *steps.SuiteFault
	if !errors.As(err, &sf) {
		t.Fatalf("an unrouted delivery was not a suite fault: %v", err)
	}
	if err := strays(f, "contractrefine-enforce"); err != nil {
		t.Fatalf("another fixture's mailboxes are not this one's: %v", err)
	}
}
