package httpretry

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// TestQuotaBurstAfterALateRenewalGetsAtMostOne429: a quota of 10 per 1s
// window, the reset announced in whole seconds rounded up, so the client
// first places its window's end up to a second after the server's. Half
// of the server's next window is then spent (its responses say 5 left),
// and 10 callers start at once just after the client's own reset: the
// client must not renew the window to 10 while the server's still has
// 5. At most one 429 in any window.
func TestQuotaBurstAfterALateRenewalGetsAtMostOne429(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	srv := newPacedServer(fc, 10, time.Second)
	gate := make(chan struct{})
	var held atomic.Bool
	var entered atomic.Int64
	srv.answer = func(*http.Request, int) (int, error) {
		if held.Load() {
			entered.Add(1)
			<-gate
		}
		return 0, nil
	}
	tr := &Transport{Base: srv, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{Rand: admitAll}}
	get := func() error {
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	fc.Advance(500 * time.Millisecond)
	if err := get(); err != nil { // window 0; the client's reset: 1.5s
		t.Fatal(err)
	}
	fc.Advance(700 * time.Millisecond)
	for range 5 { // window 1: 5 left
		if err := get(); err != nil {
			t.Fatal(err)
		}
	}
	fc.Advance(400 * time.Millisecond) // 1.6s: past the client's reset, in the server's window 1
	held.Store(true)
	var refused atomic.Int64
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if get() != nil {
				refused.Add(1)
			}
		})
	}
	for end := time.Now().Add(5 * time.Second); entered.Load()+refused.Load() < 10 && time.Now().Before(end); {
		time.Sleep(time.Millisecond) // a poll, not a timing assumption
	}
	close(gate)
	wg.Wait()
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for w, n := range srv.tooMany {
		if n > 1 {
			t.Errorf("window %d: %d 429s from 10 callers starting together; want at most 1", w, n)
		}
	}
}
