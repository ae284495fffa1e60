package httpretry

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// orderedQuotaServer is a Base with a quota of limit requests in one
// window of 60s that does not end during the test (a fake clock), told
// in RateLimit and RateLimit-Policy. It counts a request when it arrives,
// as a server does, and may hold the answer of chosen arrivals: answers
// then reach the client out of the order the server counted them, as on
// an HTTP/2 connection or several HTTP/1.1 ones when handlers take
// different times.
type orderedQuotaServer struct {
	clock clockwork.Clock
	limit int

	mu      sync.Mutex
	arrived int
	used    int
	tooMany int
	hold    map[int]chan struct{} // arrival index -> gate
	release chan struct{}         // when set, every arrival waits for it
}

func (s *orderedQuotaServer) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	i := s.arrived
	s.arrived++
	status := 200
	if s.used >= s.limit {
		status = 429
		s.tooMany++
	} else {
		s.used++
	}
	left := s.limit - s.used
	gate, all := s.hold[i], s.release
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if all != nil {
		<-all
	}
	resp := response(req, status, "")
	resp.Header.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=60`, left))
	resp.Header.Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=60`, s.limit))
	return resp, nil
}

func (s *orderedQuotaServer) counts() (arrived, tooMany int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.arrived, s.tooMany
}

// TestAttack4QuotaStaleAnswerDoesNotRaiseTheCount: within one window the
// server's remaining count only falls. Three operations admitted
// together (4 in the quota, 1 used) are counted by the server as r=2, 1
// and 0; the answer r=2 reaches the client last. The Transport takes the
// last answer's count as the truth once nothing is in flight, so the
// stale r=2 puts 2 requests back into a quota the server already said
// was spent (r=0), and two concurrent operations then both meet a 429 in
// the same window. The README promises "a process gets at most one 429
// per quota window".
func TestAttack4QuotaStaleAnswerDoesNotRaiseTheCount(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	gate := make(chan struct{})
	srv := &orderedQuotaServer{clock: fc, limit: 4, hold: map[int]chan struct{}{1: gate}}
	tr := &Transport{Base: srv, Clock: fc, MaxAttempts: 1, Throttle: &throttle.Throttle{Rand: admitAll}}
	call := func() error { return get(t, tr, "http://api.test/") }
	if err := call(); err != nil { // r=3: the quota is known
		t.Fatal(err)
	}
	// Three together: the server counts the first to arrive as r=2 and
	// holds its answer until r=1 and r=0 have reached the client.
	var wg sync.WaitGroup
	done := make(chan error, 3)
	for range 3 {
		wg.Go(func() { done <- call() })
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("before the quota was spent: %v", err)
		}
	}
	close(gate)
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The server has said r=0. Two operations together: the server
	// answers once both arrived (or once the client refused one; a poll
	// of 5s at most, not a timing assumption).
	release := make(chan struct{})
	srv.mu.Lock()
	srv.release = release
	before := srv.arrived
	srv.mu.Unlock()
	var refused sync.WaitGroup
	var mu sync.Mutex
	nRefused := 0
	for range 2 {
		refused.Go(func() {
			if err := call(); errors.Is(err, throttle.ErrQuotaExhausted) {
				mu.Lock()
				nRefused++
				mu.Unlock()
			}
		})
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		a, _ := srv.counts()
		mu.Lock()
		r := nRefused
		mu.Unlock()
		if a-before+r >= 2 {
			break
		}
	}
	close(release)
	refused.Wait()
	if _, n := srv.counts(); n > 1 {
		t.Errorf("one window: %d 429s after the server answered r=0 and a stale r=2 arrived last; want at most 1 (README: a process gets at most one 429 per quota window; a server's remaining count never rises within a window)", n)
	}
}
