package sink

import (
	"net/http"
	"strings"
	"testing"
)

func TestTheSinkKeepsDeliveriesAndFindsThemByMarker(t *testing.T) {
	s := Start()
	defer s.Close()
	for _, body := range []string{`{"text":"parley-a"}`, `{"text":"parley-b"}`, `{"text":"parley-a again"}`} {
		resp, err := http.Post(s.URL(), "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("delivery answered %d", resp.StatusCode)
		}
	}
	if n := len(s.Carrying("parley-a")); n != 2 {
		t.Fatalf("want 2 deliveries carrying parley-a, got %d", n)
	}
	if n := len(s.Carrying("parley-c")); n != 0 {
		t.Fatalf("want none carrying parley-c, got %d", n)
	}
	resp, err := http.Get(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || len(s.Carrying("")) != 3 {
		t.Fatal("a GET was taken as a delivery")
	}
}
