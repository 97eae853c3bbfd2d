package fakemail

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func post(t *testing.T, url, key string) (int, map[string]any) {
	req, _ := http.NewRequest("POST", url+"/send", strings.NewReader(`{"to":"bob"}`))
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("X-AGL-Operation-Id", key)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var m map[string]any
	json.NewDecoder(res.Body).Decode(&m)
	return res.StatusCode, m
}

func TestIdempotencyAndLookup(t *testing.T) {
	for _, idem := range []bool{false, true} {
		s := New(idem)
		srv := httptest.NewServer(s)
		st, first := post(t, srv.URL, "k1")
		require.Equal(t, 200, st)
		_, second := post(t, srv.URL, "k1")
		if idem {
			assert.Equal(t, 1, s.CountFor("k1"))
			assert.Equal(t, first["message_id"], second["message_id"])
			assert.Equal(t, true, second["duplicate"])
		} else {
			assert.Equal(t, 2, s.CountFor("k1"), "without idempotency every send is an effect")
		}
		res, err := http.Get(srv.URL + "/lookup?key=k1")
		require.NoError(t, err)
		var lk map[string]any
		json.NewDecoder(res.Body).Decode(&lk)
		res.Body.Close()
		assert.Equal(t, true, lk["found"])
		assert.Equal(t, first["message_id"], lk["message_id"])
		srv.Close()
	}
}

func TestFaults(t *testing.T) {
	s := New(false)
	srv := httptest.NewServer(s)
	defer srv.Close()
	s.Inject(Fault{Mode: FaultReject})
	st, _ := post(t, srv.URL, "a")
	assert.Equal(t, 422, st)
	assert.Equal(t, 0, s.Count(), "a rejection has no effect")
	s.Inject(Fault{Mode: FaultFailAfterEffect})
	st, _ = post(t, srv.URL, "b")
	assert.Equal(t, 500, st)
	assert.Equal(t, 1, s.Count(), "the effect happened before the failure")
}

// TestHangsAndRequestLog: a hang before the effect records no effect, a hang
// after it records one; both are logged as requests the client abandoned,
// and a hung lookup is logged too.
func TestHangsAndRequestLog(t *testing.T) {
	s := New(false)
	srv := httptest.NewServer(s)
	defer srv.Close()
	hc := &http.Client{Timeout: 200 * time.Millisecond}
	send := func() error {
		req, _ := http.NewRequest("POST", srv.URL+"/send", strings.NewReader(`{"to":"bob"}`))
		req.Header.Set("Idempotency-Key", "k")
		res, err := hc.Do(req)
		if err == nil {
			res.Body.Close()
		}
		return err
	}
	s.Inject(Fault{Mode: FaultHangNoEffect})
	require.Error(t, send())
	assert.Equal(t, 0, s.Count())
	s.Inject(Fault{Mode: FaultHang})
	require.Error(t, send())
	assert.Equal(t, 1, s.Count())
	s.Inject(Fault{Mode: FaultHangLookup})
	_, err := hc.Get(srv.URL + "/lookup?key=k")
	require.Error(t, err)
	require.Eventually(t, func() bool {
		reqs := s.Requests()
		return len(reqs) == 3 && reqs[0].Abandoned && reqs[1].Abandoned && reqs[2].Abandoned
	}, 2*time.Second, 10*time.Millisecond)
	reqs := s.Requests()
	assert.Equal(t, []string{FaultHangNoEffect, FaultHang, FaultHangLookup}, []string{reqs[0].Fault, reqs[1].Fault, reqs[2].Fault})
	assert.Equal(t, "/lookup", reqs[2].Path)
}
