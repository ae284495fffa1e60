package paymentsim

import (
	"bytes"
	"context"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Fault is what the injector does to one attempt.
type Fault int

// The faults, in the order Faults.decide draws them.
const (
	// Pass forwards the request and returns the response.
	Pass Fault = iota
	// Reset resets the client's connection before the request is
	// forwarded: the service never sees it.
	Reset
	// Drop forwards the request, reads the whole response (the charge is
	// committed and recorded) and then resets the client's connection.
	Drop
	// Delay forwards the request and holds the response for
	// Faults.DelayBy, past the client's attempt timeout.
	Delay
)

// Faults says how often each fault happens, in thousandths of attempts,
// and how each attempt's fault is drawn: from Salt, the order and the
// attempt's number for that order, so that a run is reproducible.
type Faults struct {
	Salt          uint64
	ResetPerMille int
	DropPerMille  int
	DelayPerMille int
	// DelayBy is how long a Delay holds the response; make it longer than
	// the client's AttemptTimeout.
	DelayBy time.Duration
	// SlowPerMille of the orders take SlowBy at the provider, so that a
	// retry meets the first attempt still running (409 Conflict).
	SlowPerMille int
	SlowBy       time.Duration
}

// Latency is the provider's latency for order: SlowBy for SlowPerMille of
// the orders, drawn from Salt and the order; 0 for the others.
func (f Faults) Latency(order string) time.Duration {
	if int(splitmix(f.Salt^hashString(order)^0x51)%1000) < f.SlowPerMille {
		return f.SlowBy
	}
	return 0
}

// decide draws the fault of an order's attempt (numbered from 1).
func (f Faults) decide(order string, attempt int) Fault {
	x := splitmix(f.Salt ^ hashString(order) ^ uint64(attempt)*0x9e3779b97f4a7c15)
	n := int(x % 1000)
	switch {
	case n < f.ResetPerMille:
		return Reset
	case n < f.ResetPerMille+f.DropPerMille:
		return Drop
	case n < f.ResetPerMille+f.DropPerMille+f.DelayPerMille:
		return Delay
	}
	return Pass
}

// hashString is the FNV-1a hash of s.
func hashString(s string) uint64 {
	h := fnv.New64a()
	io.WriteString(h, s)
	return h.Sum64()
}

// splitmix is the SplitMix64 finalizer: a well-mixed 64-bit hash of x.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Injector is a reverse proxy that spreads attempts over its upstreams
// (an order's successive attempts go to alternate instances) and injects
// Faults. Create it with [NewInjector]; it is safe for concurrent use.
type Injector struct {
	upstreams []string // base URLs
	faults    Faults
	client    *http.Client

	counts [4]atomic.Int64 // by Fault

	mu       sync.Mutex // protects attempts
	attempts map[string]int
}

// NewInjector returns an injector in front of the upstream base URLs.
func NewInjector(faults Faults, upstreams ...string) *Injector {
	return &Injector{
		upstreams: upstreams,
		faults:    faults,
		client:    &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		attempts:  make(map[string]int),
	}
}

// Count returns how many attempts got fault f.
func (in *Injector) Count(f Fault) int64 { return in.counts[f].Load() }

// CloseIdleConnections closes the injector's idle upstream connections.
func (in *Injector) CloseIdleConnections() { in.client.CloseIdleConnections() }

// ServeHTTP forwards r, injecting the fault drawn for its order and
// attempt.
func (in *Injector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	order := r.Header.Get(OrderHeader)
	in.mu.Lock()
	in.attempts[order]++
	attempt := in.attempts[order]
	in.mu.Unlock()
	fault := in.faults.decide(order, attempt)
	in.counts[fault].Add(1)
	if fault == Reset {
		reset(w)
		return
	}
	// The charge goes through even if the client gives up meanwhile, as
	// it would in a real network: its outcome is what the client must
	// learn from a retry.
	resp, body, err := in.forward(context.WithoutCancel(r.Context()), r, in.upstreams[(int(hashString(order)%1024)+attempt)%len(in.upstreams)])
	if err != nil {
		http.Error(w, "paymentsim: upstream failed", http.StatusBadGateway)
		return
	}
	switch fault {
	case Drop:
		reset(w)
		return
	case Delay:
		t := time.NewTimer(in.faults.DelayBy)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}

// forward sends r to upstream and reads the whole response.
func (in *Injector) forward(ctx context.Context, r *http.Request, upstream string) (*http.Response, []byte, error) {
	reqBody, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err != nil {
		return nil, nil, err
	}
	out, err := http.NewRequestWithContext(ctx, r.Method, upstream+r.URL.RequestURI(), bytes.NewReader(reqBody))
	if err != nil {
		return nil, nil, err
	}
	out.Header = r.Header.Clone()
	resp, err := in.client.Do(out)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// reset closes the client's connection with a TCP reset (SO_LINGER 0),
// without a response.
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	conn.Close()
}
