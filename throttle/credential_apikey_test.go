package throttle

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestQuotaOfAnAPIKeyIsItsOwn: a request carrying an X-Api-Key (and no
// Authorization) draws from that key's quota: carol's key spent, carol is
// refused until the reset; dave's key, and a request carrying no
// credential, are sent.
func TestQuotaOfAnAPIKeyIsItsOwn(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClockAt(ruleDate)
	th := &Throttle{draws: func() float64 { return 1 }}
	send := func(key string, h http.Header) error {
		req := httptest.NewRequest(http.MethodGet, "https://api.test/x", nil)
		if key != "" {
			req.Header.Set("X-Api-Key", key)
		}
		d := th.Dest(req)
		_, _, err := th.Admit(d, req, fc)
		if err == nil && h != nil {
			th.record(d, &http.Response{StatusCode: http.StatusOK, Header: h, Request: req}, nil, fc.Now(), fc)
		}
		return err
	}
	spent := http.Header{"X-Ratelimit-Limit": {"100"}, "X-Ratelimit-Remaining": {"0"},
		"X-Ratelimit-Reset": {itoa(ruleDate.Add(time.Hour).Unix())}}
	if err := send("carolKey", spent); err != nil {
		t.Fatalf("carol's first request: %v", err)
	}
	if err := send("carolKey", nil); !errors.Is(err, ErrQuotaExhausted) {
		t.Errorf("carol with her key's quota spent: %v; want ErrQuotaExhausted", err)
	}
	if err := send("daveKey", nil); err != nil {
		t.Errorf("dave's key: %v; want sent", err)
	}
	if err := send("", nil); err != nil {
		t.Errorf("no credential: %v; want sent", err)
	}
}
