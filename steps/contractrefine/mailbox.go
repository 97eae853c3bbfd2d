package contractrefine

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/parley-conformance/parley/fixtures"
	"github.com/parley-conformance/parley/steps"
)

// maxDelivery bounds one delivery a mailbox keeps.
const maxDelivery = 1 << 20

// mailbox is the scenario's own destination for tool.deliver: a path on
// the run's fakes under its fixture's deliver_url, leased for the
// scenario alone. Every delivery reaching it must carry a marker of one of
// the scenario's own calls; one that does not is another lease's state
// seen here, which is a fault of the suite's leasing (two scenarios given
// one mailbox), not of the host under test.
type mailbox struct {
	id     string // params.mailbox: the leased name
	path   string // the routed prefix on the fakes
	prefix string // what every marker of the scenario's calls starts with

	mu      sync.Mutex
	got     []delivery
	foreign []string // bodies of deliveries carrying no marker of the scenario
}

type delivery struct {
	text string // params.text
	body []byte
}

func newMailbox(id, path, prefix string) *mailbox {
	return &mailbox{id: id, path: path, prefix: prefix}
}

func (m *mailbox) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "a mailbox takes POST", http.StatusMethodNotAllowed)
		return
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxDelivery))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var p struct {
		Text    string `json:"text"`
		Mailbox string `json:"mailbox"`
	}
	_ = json.Unmarshal(b, &p)
	m.mu.Lock()
	if strings.HasPrefix(p.Text, m.prefix) && (p.Mailbox == "" || p.Mailbox == m.id) {
		m.got = append(m.got, delivery{text: p.Text, body: b})
	} else {
		m.foreign = append(m.foreign, string(b))
	}
	m.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// carrying returns the deliveries of the call marked marker, or the
// suite's fault when the mailbox saw another lease's state.
func (m *mailbox) carrying(marker string) ([]delivery, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.foreign) > 0 {
		return nil, steps.Fault("saw another lease's state: mailbox %s, leased to this scenario alone, received a delivery carrying none of its calls' markers: %s", m.path, m.foreign[0])
	}
	var out []delivery
	for _, d := range m.got {
		if d.text == marker {
			out = append(out, d)
		}
	}
	return out, nil
}

// strays reports a delivery that reached one of the fixture's mailboxes
// no running scenario holds: a lease's state seen outside it.
func strays(fakes *fixtures.Fakes, fixture string) error {
	under := "POST " + fixtures.CRDeliverPath(fixture)
	for _, s := range fakes.Strays() {
		if strings.HasPrefix(s, under) {
			return steps.Fault("saw another lease's state: a delivery reached %s, a mailbox no running scenario holds", strings.TrimPrefix(s, "POST "))
		}
	}
	return nil
}

// openMailbox leases a mailbox of the fixture and routes its path on the
// run's fakes to the scenario until it ends.
func openMailbox(ctx context.Context, fixture string) error {
	w, s := steps.From(ctx), st(ctx)
	if s.box != nil {
		return nil
	}
	fakes, err := w.Fakes()
	if err != nil {
		return err
	}
	_, id, err := w.Lease(fixtures.CRMailboxes)
	if err != nil {
		return err
	}
	box := newMailbox(id, fixtures.CRDeliverPath(fixture)+id+"/", s.text)
	unroute, err := fakes.Route(box.path, box)
	if err != nil {
		return steps.Fault("%v", err)
	}
	w.Cleanup(unroute)
	s.box, s.fixture = box, fixture
	return nil
}
