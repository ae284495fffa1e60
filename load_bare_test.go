package httpretry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/httpretry/httpretry/httptestutil"
)

// This file measures what "on time" means for a test that runs real
// operations on loopback under a deadline, on whatever machine runs it.
// How late a goroutine returns after its deadline fired depends on the
// scheduler: a few milliseconds on an idle machine, seconds on a 2-core
// machine with CPU-bound neighbours under -race. Rather than guess a fixed
// slack, such a test runs a bareProbe beside itself: a few plain
// http.Transports making requests that run into the same deadline (a
// server that never answers, and one that trickles its body so the
// deadline ends the read), and reads the slack it allows from how late
// they returned, in the same run, under the same load.

// bareProbe runs the bare requests until stopped.
type bareProbe struct {
	deadline time.Duration
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	servers  []*httptestutil.Server

	mu   sync.Mutex // protects late
	late []time.Duration
}

// startBareProbe starts workers bare clients, each making one request
// after another under a deadline of d, over HTTP/1.1 and HTTP/2, against
// a hang and a trickling body in turn.
func startBareProbe(workers int, d time.Duration) *bareProbe {
	p := &bareProbe{deadline: d}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	hang := httptestutil.Step{Action: httptestutil.Hang}
	trickle := httptestutil.Step{Action: httptestutil.Trickle, Body: strings.Repeat("t", 1000), Interval: 50 * ms}
	for _, step := range []httptestutil.Step{hang, trickle} {
		p.servers = append(p.servers, httptestutil.NewServer(step), httptestutil.NewTLSServer(step))
	}
	for i := range workers {
		srv := p.servers[i%len(p.servers)]
		tr := srv.Client().Transport.(*http.Transport).Clone()
		tr.ForceAttemptHTTP2 = srv.TLS != nil
		client := &http.Client{Transport: tr}
		p.wg.Go(func() {
			defer tr.CloseIdleConnections()
			for p.ctx.Err() == nil {
				p.once(client, srv.URL)
			}
		})
	}
	return p
}

// once makes one bare request, reads its body as the tests' callers do,
// and records how long after the deadline it returned.
func (p *bareProbe) once(client *http.Client, url string) {
	began := time.Now()
	ctx, cancel := context.WithDeadline(p.ctx, began.Add(p.deadline))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return
	}
	if resp, err := client.Do(req); err == nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}
	late := time.Since(began) - p.deadline
	if p.ctx.Err() != nil {
		return // stopped early: not a sample
	}
	p.mu.Lock()
	p.late = append(p.late, late)
	p.mu.Unlock()
}

// samples returns how many requests have been measured.
func (p *bareProbe) samples() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.late)
}

// stop waits until at least n requests have been measured (a test run
// with -run on a few short cells ends before any has), then stops the
// probe, closes its servers and returns how late each request returned.
func (p *bareProbe) stop(n int) []time.Duration {
	for limit := time.Now().Add(3 * p.deadline); p.samples() < n && time.Now().Before(limit); {
		time.Sleep(10 * ms)
	}
	p.cancel()
	p.wg.Wait()
	for _, s := range p.servers {
		s.Close()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.late)
}

// bareSlack is how long past a deadline an operation of the Transport may
// return: factor times the q-th percentile (100: the latest) of how late
// the bare requests returned past the same deadline, plus floor for the
// work a Transport does that a bare request does not (closing a discarded
// response, reporting its outcome). It also describes the measurement for
// the test's log.
func bareSlack(late []time.Duration, q, factor int, floor time.Duration) (time.Duration, string) {
	if len(late) == 0 {
		return floor, fmt.Sprintf("no bare request measured; slack %v", floor)
	}
	s := slices.Sorted(slices.Values(late))
	at := s[max((len(s)*q+99)/100-1, 0)]
	slack := time.Duration(factor)*max(at, 0) + floor
	round := func(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
	return slack, fmt.Sprintf("%d bare requests past the same deadline: median %v, p99 %v, max %v; slack %d×p%d + %v = %v",
		len(s), round(s[len(s)/2]), round(s[max((len(s)*99+99)/100-1, 0)]), round(s[len(s)-1]), factor, q, floor, round(slack))
}
