package main

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// get sends one GET tagged with phase and returns its status.
func get(t *testing.T, c *http.Client, url string, phase string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if phase != "" {
		req.Header.Set(phaseHeader, phase)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func TestServerPhaseAt(t *testing.T) {
	t.Parallel()
	s := &server{start: time.Unix(1000, 0), phases: []phase{
		{name: "healthy", dur: time.Second},
		{name: "outage", dur: 2 * time.Second, mode: outage},
		{name: "recovery", dur: time.Second},
	}}
	for _, tt := range []struct {
		at   time.Duration
		want string
	}{
		{0, "healthy"},
		{999 * time.Millisecond, "healthy"},
		{time.Second, "outage"},
		{2999 * time.Millisecond, "outage"},
		{3 * time.Second, "recovery"},
		// The last phase holds once the schedule has run out.
		{time.Hour, "recovery"},
	} {
		p, el := s.phaseAt(s.start.Add(tt.at))
		if p.name != tt.want || el != tt.at {
			t.Errorf("phaseAt(+%v) = %s, %v; want %s, %v", tt.at, p.name, el, tt.want, tt.at)
		}
	}
}

// TestServerAdmit checks every mode's admission on synthetic times, with
// no network and no clock.
func TestServerAdmit(t *testing.T) {
	t.Parallel()
	s := &server{capacity: 4}
	s.lastSlot.Store(-1)
	if s.admit(phase{mode: outage}, 0) {
		t.Error("outage admitted a request")
	}
	for i := range 4 {
		if !s.admit(phase{mode: healthy}, 0) {
			t.Fatalf("healthy refused request %d of a capacity of 4", i+1)
		}
	}
	if s.admit(phase{mode: healthy}, 0) {
		t.Error("healthy admitted a fifth request at a capacity of 4")
	}
	s.inflight.Store(1)
	if s.admit(phase{mode: brownout, capacity: 0.5}, 0) != true || s.admit(phase{mode: brownout, capacity: 0.5}, 0) {
		t.Error("brownout at half of 4 with one in flight: want one more admitted, then a refusal")
	}
	s.inflight.Store(0)
	if !s.admit(phase{mode: brownout, capacity: 0.01}, 0) || s.admit(phase{mode: brownout, capacity: 0.01}, 0) {
		t.Error("brownout at 1%: want exactly one request admitted, never none")
	}
	if s.inflight.Load() != 1 {
		t.Errorf("in flight = %d after refusals, want 1: a refusal must give its slot back", s.inflight.Load())
	}

	w := phase{mode: contended, window: 10 * time.Millisecond}
	got := []bool{
		s.admit(w, 1*time.Millisecond), s.admit(w, 2*time.Millisecond), s.admit(w, 9*time.Millisecond), // window 0
		s.admit(w, 35*time.Millisecond), s.admit(w, 36*time.Millisecond), // window 3
		s.admit(w, 20*time.Millisecond), // window 2, late: lost
		s.admit(w, 40*time.Millisecond), // window 4
	}
	want := []bool{true, false, false, true, false, false, true}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("contended admissions = %v, want %v", got, want)
		}
	}
	if d, sh := s.down.Load(), s.shed.Load(); d != 1 || sh != 3+4 {
		t.Errorf("outage refusals %d, shed %d; want 1, 7", d, sh)
	}
}

// TestServerCounts checks the server's counters over real requests.
func TestServerCounts(t *testing.T) {
	t.Parallel()
	phases := []phase{{name: "outage", dur: time.Hour, mode: outage}, {name: "recovery", dur: time.Hour}}
	srv := newServer(phases, 2, time.Millisecond, time.Second)
	c := &http.Client{Transport: &http.Transport{}}
	var got []int
	for _, tag := range []string{"0", "1", "1", "bogus", ""} {
		got = append(got, get(t, c, srv.url(), tag))
	}
	c.CloseIdleConnections()
	srv.close()

	for i, code := range got {
		if code != http.StatusServiceUnavailable {
			t.Fatalf("status of request %d = %d, want 503 (statuses %v)", i, code, got)
		}
	}
	if h := srv.hits.Load(); h != 5 {
		t.Errorf("hits = %d, want 5", h)
	}
	// Hits are charged to the tag the client sent, not to the clock.
	if p := timeline(srv.byPhase); p[0] != 1 || p[1] != 2 || p[2] != 2 {
		t.Errorf("hits by phase = %v, want [1 2 2]", p)
	}
	if d, s := srv.down.Load(), srv.shed.Load(); d != 5 || s != 0 {
		t.Errorf("outage 503s %d, shed %d; want 5, 0", d, s)
	}
	var sum int64
	for _, v := range timeline(srv.hitsAt) {
		sum += v
	}
	if sum != 5 {
		t.Errorf("hits in the timeline = %d, want 5", sum)
	}
	if n := srv.conns.Load(); n != 1 {
		t.Errorf("connections = %d, want 1 (one client, requests in sequence)", n)
	}
}
