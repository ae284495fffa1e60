package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/httpretry/httpretry/contrib/pgidempotency/internal/pgtest"
)

// fleet is the instances of the payment service, restarted when they die,
// and an http.RoundTripper that sends each attempt to a random one.
type fleet struct {
	svc     serviceConfig
	addrs   []string
	mu      sync.Mutex // protects procs, stats, done
	procs   []*exec.Cmd
	stats   map[*exec.Cmd][2]int64 // the last STATS of each process: first requests, their store statements
	done    bool
	crashes atomic.Int64
	wg      sync.WaitGroup
	rt      http.RoundTripper
	next    atomic.Uint64
}

func startFleet(svc serviceConfig, n int) (*fleet, error) {
	f := &fleet{svc: svc, stats: map[*exec.Cmd][2]int64{}, procs: make([]*exec.Cmd, n),
		rt: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 0}}
	for i := range n {
		port, err := pgtest.FreePort()
		if err != nil {
			return nil, err
		}
		f.addrs = append(f.addrs, fmt.Sprintf("127.0.0.1:%d", port))
		if err := f.start(i); err != nil {
			f.stop()
			return nil, err
		}
	}
	return f, nil
}

// start starts instance i and restarts it whenever it dies, until stop.
func (f *fleet) start(i int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	svc := f.svc
	cmd := exec.Command(self, "-serve", "-dsn", svc.dsn, "-addr", f.addrs[i],
		"-kills", fmt.Sprint(svc.killPct), "-stalls", fmt.Sprint(svc.stallPct), "-lock", svc.lockTTL.String(),
		"-seed", fmt.Sprint(svc.seed+uint64(i)))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	listening := make(chan struct{})
	f.mu.Lock()
	f.procs[i] = cmd
	if f.done {
		// stop ran while this instance restarted.
		_ = cmd.Process.Kill()
	}
	f.mu.Unlock()
	f.wg.Go(func() {
		sc := bufio.NewScanner(out)
		once := sync.Once{}
		for sc.Scan() {
			var a, b, r, rs int64
			switch line := sc.Text(); {
			case line == "LISTEN":
				once.Do(func() { close(listening) })
			case strings.HasPrefix(line, "STATS "):
				fmt.Sscan(strings.TrimPrefix(line, "STATS "), &a, &b, &r, &rs)
				f.mu.Lock()
				f.stats[cmd] = [2]int64{a, b}
				f.mu.Unlock()
			}
		}
		once.Do(func() { close(listening) })
		_ = cmd.Wait()
		f.mu.Lock()
		done := f.done
		f.mu.Unlock()
		if !done {
			f.crashes.Add(1)
			if err := f.start(i); err != nil {
				fmt.Fprintln(os.Stderr, "paymentspg: restart:", err)
			}
		}
	})
	<-listening
	return nil
}

// killRandomly kills a random instance at random moments, about every d,
// until the returned function is called.
func (f *fleet) killRandomly(d time.Duration, faults *faults) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(d/2 + time.Duration(faults.intn(int(d)))):
			}
			f.mu.Lock()
			p := f.procs[faults.intn(len(f.procs))]
			f.mu.Unlock()
			if p != nil && p.Process != nil {
				_ = p.Process.Kill()
			}
		}
	}()
	return func() { close(stop); <-done }
}

// RoundTrip sends an attempt to the next instance, in turn.
func (f *fleet) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.URL.Host = f.addrs[f.next.Add(1)%uint64(len(f.addrs))]
	r.Host = r.URL.Host
	return f.rt.RoundTrip(r)
}

// statements sums the instances' first requests and their store
// statements.
func (f *fleet) statements() (firsts, stmts int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.stats {
		firsts += s[0]
		stmts += s[1]
	}
	return firsts, stmts
}

func (f *fleet) stop() {
	f.mu.Lock()
	f.done = true
	procs := append([]*exec.Cmd(nil), f.procs...)
	f.mu.Unlock()
	for _, p := range procs {
		if p != nil && p.Process != nil {
			_ = p.Process.Kill()
		}
	}
	f.wg.Wait()
}
