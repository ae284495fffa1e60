package main

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// arrival is one logical operation of the open-loop load.
type arrival struct {
	at    time.Duration // since the start of the run
	phase int           // index of the phase at
}

// arrivals returns the arrivals of a Poisson process of rate per second
// over the phases, drawn from seed: exponential gaps of mean 1/rate. The
// same seed gives every policy the same arrivals, so that their
// differences are the policies' and not the dice's.
func arrivals(seed uint64, rate float64, phases []phase) []arrival {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out []arrival
	t, p, end := 0.0, 0, phases[0].dur
	for rate > 0 {
		t += r.ExpFloat64() / rate
		at := time.Duration(t * float64(time.Second))
		for at >= end {
			p++
			if p == len(phases) {
				return out
			}
			end += phases[p].dur
		}
		out = append(out, arrival{at: at, phase: p})
	}
	return out
}

// opResult is what one operation came to, seen from its caller.
type opResult struct {
	phase   int
	start   time.Duration // since the start of the run
	latency time.Duration // until the body was read and closed, or the error
	ok      bool          // a 200, read to the end within the deadline
	err     bool          // an error rather than a response
	status  int           // the returned status; 0 with an error
}

// end returns when the operation ended, since the start of the run.
func (o opResult) end() time.Duration { return o.start + o.latency }

// drive runs the open-loop load against srv: every arrival starts one GET
// at its time, whatever happened to the earlier ones, through the
// client of the simulated process that owns it (arrivals are dealt to the
// fleet's processes in turn). Each operation has its own context deadline.
// drive returns when every operation has ended; operations not yet started
// when ctx ends are left out.
func drive(ctx context.Context, srv *server, arr []arrival, f *fleet, deadline time.Duration) []opResult {
	results := make([]opResult, len(arr))
	var wg sync.WaitGroup
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	n := 0
	for i, a := range arr {
		if d := time.Until(srv.start.Add(a.at)); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		n++
		c := f.client(i)
		wg.Go(func() {
			results[i] = do(ctx, c, srv, a.phase, deadline)
		})
	}
	wg.Wait()
	return results[:n]
}

// do sends one operation and reads its response.
func do(ctx context.Context, c *http.Client, srv *server, phase int, deadline time.Duration) opResult {
	start := time.Now()
	o := opResult{phase: phase, start: start.Sub(srv.start)}
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.url()+"/item", nil)
	if err != nil {
		panic(err) // a constant URL: cannot happen
	}
	req.Header.Set(phaseHeader, strconv.Itoa(phase))
	resp, err := c.Do(req)
	if err != nil {
		o.err = true
	} else {
		_, rerr := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		o.status = resp.StatusCode
		o.ok = rerr == nil && resp.StatusCode == http.StatusOK
	}
	o.latency = time.Since(start)
	o.ok = o.ok && o.latency <= deadline
	return o
}
