// Command spread measures where the retries and hedges of httpretry go
// when a hostname resolves to several addresses. Four backends listen on
// 127.0.0.2 to 127.0.0.5 behind one hostname (a resolver answers those
// four), over HTTP/1.1 and over HTTP/2 with TLS (a certificate for the
// hostname only). The same arrivals go through httpretry as it is used
// today, over one pooled *http.Transport whose dialer picks one of the
// host's addresses at random for each new connection, and through
// httpretry over spread.Transport, first with one backend failing (it
// resets every request), then with one slow (it answers in a second):
// after 20 operations sent one by one, the backend that got the most of
// them, the one the client is connected to, fails or goes slow.
// Every policy has MaxAttempts 2, a 3 s Timeout, a budget that refuses no
// retry (so that the addresses alone differ) and, with the slow backend,
// hedges after 50 ms.
//
// It prints a markdown table of every run on stdout, then the line
//
//	spread: retries on another address X%, hedges on another address Y%, success Z% with 1 of 4 backends failing, TLS errors T
//
// over the spread runs: X of the operations with one backend failing
// whose second attempt (httpretry's, which each attempt's Retry-Attempt
// header numbers) reached a backend, the share whose second attempt went
// only to backends the first had not reached; Y the same with one backend
// slow, where the second attempt is a hedge; Z the share of operations that succeeded with one failing; T the
// attempts that failed on TLS (a certificate or handshake error). It
// exits 1 when X < 99, Y < 99, Z < 99.9 or T > 0.
//
// Usage, from the bench module (make spread writes docs/storm/spread.md):
//
//	go run ./spread
//	go run ./spread -rate 50 -duration 2s
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-cleanhttp"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/spread"
	"github.com/httpretry/httpretry/spread/spreadtest"
)

var loopback = []netip.Addr{
	netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3"),
	netip.MustParseAddr("127.0.0.4"), netip.MustParseAddr("127.0.0.5"),
}

// run is one policy through one scenario's arrivals.
type run struct {
	proto     string // "HTTP/1.1" or "HTTP/2 (TLS)"
	fault     string // "1 failing" or "1 slow"
	policy    string
	spread    bool
	ops       int
	ok        int
	second    int // operations whose second attempt reached a backend
	elsewhere int // of those, the second request went to another backend than the first
	tlsErrs   int64
	conns     int64
	p99       time.Duration // of the operations' durations
}

func main() {
	rate := flag.Float64("rate", 100, "operations per second")
	duration := flag.Duration("duration", 5*time.Second, "arrivals per run")
	flag.Parse()
	var runs []*run
	for _, tls := range []bool{false, true} {
		for _, fault := range []spreadtest.Behaviour{spreadtest.Reset, spreadtest.Slow} {
			for _, policy := range []string{"today", "spread", "spread, no ejection"} {
				if fault == spreadtest.Slow && policy == "spread, no ejection" {
					continue
				}
				r, err := measure(tls, fault, policy, *rate, *duration)
				if err != nil {
					fmt.Fprintln(os.Stderr, "spread:", err)
					os.Exit(1)
				}
				fmt.Fprintf(os.Stderr, "%s, %s, %s: %d ops, %d ok\n", r.proto, r.fault, r.policy, r.ops, r.ok)
				runs = append(runs, r)
			}
		}
	}
	if !report(os.Stdout, runs, *rate, *duration) {
		os.Exit(1)
	}
}

// measure runs the arrivals of one scenario through one policy, against
// four backends of their own.
func measure(useTLS bool, fault spreadtest.Behaviour, policy string, rate float64, duration time.Duration) (*run, error) {
	var seen sync.Map // X-Op → *opSeen
	g, err := spreadtest.Start(loopback, spreadtest.Options{TLS: useTLS, Slow: time.Second, OnRequest: func(b *spreadtest.Backend, r *http.Request) {
		v, _ := seen.LoadOrStore(r.Header.Get("X-Op"), new(opSeen))
		v.(*opSeen).add(r.Header.Get(httpretry.AttemptHeader), b.Index)
	}})
	if err != nil {
		return nil, err
	}
	defer g.Close()
	r := &run{proto: "HTTP/1.1", fault: "1 failing", policy: policy, spread: policy != "today"}
	if useTLS {
		r.proto = "HTTP/2 (TLS)"
	}
	if fault == spreadtest.Slow {
		r.fault = "1 slow"
	}
	var tlsErrs atomic.Int64
	client, closeIdle := newClient(g, fault, policy, &tlsErrs)
	defer closeIdle()
	warmUp(client, g).Set(fault)
	seen.Clear()
	n := int(rate * duration.Seconds())
	var ok atomic.Int64
	var wg sync.WaitGroup
	took := make([]time.Duration, n)
	start := time.Now()
	for i := range n {
		time.Sleep(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
		wg.Add(1)
		go func() {
			defer wg.Done()
			began := time.Now()
			if get(client, g.URL, fmt.Sprint(i)) {
				ok.Add(1)
			}
			took[i] = time.Since(began)
		}()
	}
	wg.Wait()
	r.ops, r.ok, r.tlsErrs = n, int(ok.Load()), tlsErrs.Load()
	slices.Sort(took)
	r.p99 = took[(len(took)*99+99)/100-1]
	seen.Range(func(_, v any) bool {
		if second, elsewhere := v.(*opSeen).elsewhere(); second {
			r.second++
			if elsewhere {
				r.elsewhere++
			}
		}
		return true
	})
	for _, b := range g.Backends {
		r.conns += b.Conns.Load()
	}
	return r, nil
}

// warmUp sends 20 operations one after another and returns the backend
// that got the most: the instance that fails is one the client is
// connected to, as when an instance dies under its clients.
func warmUp(client http.RoundTripper, g *spreadtest.Group) *spreadtest.Backend {
	for i := range 20 {
		get(client, g.URL, fmt.Sprint("warm-", i))
	}
	busiest := g.Backends[0]
	for _, b := range g.Backends {
		if b.Requests.Load() > busiest.Requests.Load() {
			busiest = b
		}
	}
	return busiest
}

// opSeen is the backends an operation's first and second attempts
// reached: an attempt may reach more than one, when net/http sends it
// again itself on a new connection after a reused one failed.
type opSeen struct {
	mu            sync.Mutex
	first, second []int
}

// add records that the attempt numbered attempt (httpretry's
// AttemptHeader) reached backend b.
func (o *opSeen) add(attempt string, b int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch attempt {
	case "1":
		o.first = append(o.first, b)
	case "2":
		o.second = append(o.second, b)
	}
}

// elsewhere reports whether the second attempt reached a backend, and
// whether it reached only backends the first had not.
func (o *opSeen) elsewhere() (second, elsewhere bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.second) == 0 {
		return false, false
	}
	for _, b := range o.second {
		if slices.Contains(o.first, b) {
			return true, false
		}
	}
	return true, true
}

// newClient returns the policy's client for g, and what closes its idle
// connections. Attempts that fail on TLS are counted in tlsErrs.
func newClient(g *spreadtest.Group, fault spreadtest.Behaviour, policy string, tlsErrs *atomic.Int64) (http.RoundTripper, func()) {
	perAddress := func() *http.Transport {
		tr := cleanhttp.DefaultPooledTransport()
		tr.Proxy = nil
		tr.TLSClientConfig = g.TLSConfig()
		return tr
	}
	var base http.RoundTripper
	var closeIdle func()
	switch policy {
	case "today":
		tr := perAddress()
		tr.DialContext = randomAddressDialer(g)
		base, closeIdle = tr, tr.CloseIdleConnections
	default:
		sp := &spread.Transport{Resolver: g.Resolver, New: perAddress}
		if policy == "spread, no ejection" {
			sp.EjectAfter = -1
		}
		base, closeIdle = sp, sp.CloseIdleConnections
	}
	t := &httpretry.Transport{
		Base:        base,
		MaxAttempts: 2,
		Timeout:     3 * time.Second,
		Propagate:   true, // each attempt says its number

		Budget: httpretry.NewTokenBucket(1e6, 1),
		OnAttempt: func(_ *http.Request, a httpretry.Attempt) {
			if isTLSError(a.Err) {
				tlsErrs.Add(1)
			}
		},
	}
	if fault == spreadtest.Slow {
		t.Hedging = &httpretry.Hedging{Delay: 50 * time.Millisecond, MaxExtraLoad: 0.99}
	}
	return t, closeIdle
}

// randomAddressDialer dials one of the host's addresses at random for
// each new connection: what a dialer that rotates resolved addresses does
// today.
func randomAddressDialer(g *spreadtest.Group) func(ctx context.Context, network, address string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		_, port, err := net.SplitHostPort(address)
		if err != nil {
			return nil, err
		}
		ips, err := g.Resolver.LookupNetIP(ctx, "ip", g.Host)
		if err != nil {
			return nil, err
		}
		return d.DialContext(ctx, network, net.JoinHostPort(ips[rand.IntN(len(ips))].String(), port))
	}
}

// isTLSError reports whether err is a certificate or handshake failure.
func isTLSError(err error) bool {
	var cert *tls.CertificateVerificationError
	var host x509.HostnameError
	var unknown x509.UnknownAuthorityError
	var alert tls.AlertError
	var rec tls.RecordHeaderError
	return errors.As(err, &cert) || errors.As(err, &host) || errors.As(err, &unknown) || errors.As(err, &alert) || errors.As(err, &rec)
}

// get sends one operation and reports whether it got a 200 and its body.
func get(rt http.RoundTripper, url, op string) bool {
	req, err := http.NewRequest(http.MethodGet, url+"/", nil)
	if err != nil {
		return false
	}
	req.Header.Set("X-Op", op)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err == nil && resp.StatusCode == http.StatusOK
}
