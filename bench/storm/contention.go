package main

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/httpretry/httpretry"
)

// jitter is one of the wait schedules of Marc Brooker's "Exponential
// Backoff And Jitter" (AWS Architecture Blog, 2015), as a
// [httpretry.Transport] Jitter function of the backoff window.
type jitter struct {
	name string
	fn   func(window time.Duration) time.Duration
}

// jitters returns the schedules compared, in the order of the tables.
func jitters() []jitter {
	return []jitter{
		// Every client waits the whole window: those that failed
		// together come back together.
		{"no jitter", func(w time.Duration) time.Duration { return w }},
		// Half the window, plus a uniform draw from the other half.
		{"equal jitter", func(w time.Duration) time.Duration { return w/2 + httpretry.FullJitter(w-w/2) }},
		// A uniform draw from the whole window: httpretry's default.
		{"full jitter", httpretry.FullJitter},
	}
}

// contention is one pass of the contention scenario: clients start
// together, each needs one success, and the server accepts at most one
// request per window.
type contention struct {
	jitter     string
	clients    int
	calls      int64         // server hits
	succeeded  int           // clients that got their success
	completion time.Duration // from the start until the last success
	conns      int64
}

// contentionDeadline bounds each client's operation: far longer than any
// schedule needs, so that only the schedule decides.
const contentionDeadline = 60 * time.Second

// runContention runs n clients, each an httpretry Transport with the given
// jitter, backoff windows from window doubling to capWindow·window,
// attempts and budget unlimited in practice, against a server that accepts
// one request per window. They share one connection pool large enough to keep
// a connection each, so that dials do not blur the schedule.
func runContention(ctx context.Context, n int, window time.Duration, capWindow int, j jitter) contention {
	phases := []phase{{name: "contention", dur: contentionDeadline, mode: contended, window: window}}
	srv := newServer(phases, 0, 0, contentionDeadline+2*time.Second)
	base := cleanhttp.DefaultPooledTransport()
	base.MaxIdleConnsPerHost = n

	ends := make([]time.Time, n)
	oks := make([]bool, n)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		c := &http.Client{Transport: &httpretry.Transport{
			Base:        base,
			MaxAttempts: 1 << 20,
			BaseDelay:   window,
			MaxDelay:    time.Duration(capWindow) * window,
			Budget:      httpretry.Unlimited,
			Jitter:      j.fn,
		}}
		wg.Go(func() {
			<-gate
			oks[i], ends[i] = contend(ctx, c, srv.url())
		})
	}
	start := time.Now()
	close(gate)
	wg.Wait()
	base.CloseIdleConnections()
	srv.close()

	res := contention{jitter: j.name, clients: n, calls: srv.hits.Load(), conns: srv.conns.Load()}
	for i := range n {
		if oks[i] {
			res.succeeded++
			res.completion = max(res.completion, ends[i].Sub(start))
		}
	}
	return res
}

// contend is one client: a GET retried until it succeeds or its deadline
// passes. It returns whether it succeeded and when it ended.
func contend(ctx context.Context, c *http.Client, url string) (bool, time.Time) {
	ctx, cancel := context.WithTimeout(ctx, contentionDeadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/lock", nil)
	if err != nil {
		panic(err) // a constant URL: cannot happen
	}
	resp, err := c.Do(req)
	if err != nil {
		return false, time.Now()
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err == nil && resp.StatusCode == http.StatusOK, time.Now()
}
