//go:build unix

package spread_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/jonboulle/clockwork"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/spread"
	"github.com/httpretry/httpretry/spread/spreadtest"
)

// backendProcess is a backend run as a process of its own.
type backendProcess struct {
	cmd  *exec.Cmd
	port int
}

// startBackendProcess runs the test binary as a backend on ip, on a port
// of its choosing, and kills it at the test's end.
func startBackendProcess(t *testing.T, ip netip.Addr) *backendProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), backendProcessEnv+"="+net.JoinHostPort(ip.String(), "0"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	port, perr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || perr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("backend process: %q %v", line, err)
		}
		t.Skipf("backend process cannot listen on %v here: %q", ip, line)
	}
	return &backendProcess{cmd: cmd, port: port}
}

// signal sends s to the process; after SIGSTOP it waits until every
// thread of the process has stopped (the signal is delivered a moment
// after kill returns), as /proc shows it.
func (p *backendProcess) signal(t *testing.T, s syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(s); err != nil {
		t.Fatal(err)
	}
	if s != syscall.SIGSTOP {
		return
	}
	waitFor(t, "every thread of the backend process stopped", func() bool {
		stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", p.cmd.Process.Pid))
		if err != nil || len(stats) == 0 {
			t.Fatalf("no /proc entry for the backend process: %v", err)
		}
		for _, f := range stats {
			b, err := os.ReadFile(f)
			// The state follows the command's closing parenthesis.
			i := strings.LastIndexByte(string(b), ')')
			if err != nil || i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
				return false
			}
		}
		return true
	})
}

// startInProcessBackends serves, on each of ips at port, 200 with the
// address as the body.
func startInProcessBackends(t *testing.T, ips []netip.Addr, port int) {
	t.Helper()
	for _, ip := range ips {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), strconv.Itoa(port)))
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal(err)
			}
			t.Skipf("cannot listen on %v here: %v", ip, err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, ip.String())
		})}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); srv.Serve(ln) }()
		t.Cleanup(func() { srv.Close(); wg.Wait() })
	}
}

// remotes records the address of every connection each request got.
type remotes struct {
	mu    sync.Mutex
	addrs []string
}

func (r *remotes) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.addrs = append(r.addrs, i.Conn.RemoteAddr().String())
	}}
}

func (r *remotes) count(hostport string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, a := range r.addrs {
		if a == hostport {
			n++
		}
	}
	return n
}

// TestPausedProcessIsEjectedAndItsAttemptsRetriedElsewhere: one of four
// backends is a process of its own, paused with SIGSTOP mid-run: the
// kernel still accepts its connections, and nothing answers. Every
// operation succeeds, its attempt on the paused process cut by
// AttemptTimeout and retried on another address; after EjectAfter such
// cuts the paused address gets no attempt while it is ejected. Resumed
// with SIGCONT, it gets attempts again once its ejection has ended.
func TestPausedProcessIsEjectedAndItsAttemptsRetriedElsewhere(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for AttemptTimeout twice")
	}
	paused := loopback[3]
	proc := startBackendProcess(t, paused)
	startInProcessBackends(t, loopback[:3], proc.port)
	fc := clockwork.NewFakeClock() // the ejection's clock; attempts run on the real one
	sp := &spread.Transport{
		Resolver:   spreadtest.NewResolver(loopback...),
		EjectAfter: 2,
		Clock:      fc,
		New: func() *http.Transport {
			tr := cleanhttp.DefaultPooledTransport()
			tr.Proxy = nil
			return tr
		},
	}
	defer sp.CloseIdleConnections()
	rt := &httpretry.Transport{Base: sp, MaxAttempts: 2, AttemptTimeout: time.Second,
		Budget: httpretry.NewTokenBucket(1000, 1), Jitter: noWait}
	url := fmt.Sprintf("http://spread.test:%d/", proc.port)
	pausedAt := netip.AddrPortFrom(paused, uint16(proc.port)).String()
	var seen remotes
	get := func(op int) string {
		t.Helper()
		ctx := httptrace.WithClientTrace(context.Background(), seen.trace())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatalf("op %d: %v", op, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("op %d: %d %q %v", op, resp.StatusCode, b, err)
		}
		return string(b)
	}
	for op := 0; seen.count(pausedAt) == 0; op++ { // the process answers while it runs
		if op == 400 {
			t.Fatal("400 operations and none reached the backend process")
		}
		get(op)
	}
	proc.signal(t, syscall.SIGSTOP)
	before := seen.count(pausedAt)
	for op := 0; seen.count(pausedAt)-before < 2; op++ {
		if op == 400 {
			t.Fatalf("400 operations reached the paused process %d times, want 2", seen.count(pausedAt)-before)
		}
		if body := get(op); body == paused.String() {
			t.Fatalf("op %d answered by the paused process", op)
		}
	}
	for op := range 60 {
		get(op)
	}
	if n := seen.count(pausedAt) - before; n != 2 {
		t.Fatalf("the paused process got %d attempts, want the 2 that eject it", n)
	}
	proc.signal(t, syscall.SIGCONT)
	fc.Advance(spread.DefaultEjectFor)
	for op := 0; ; op++ {
		if op == 400 {
			t.Fatal("400 operations after its ejection ended and none answered by the resumed process")
		}
		if get(op) == paused.String() {
			break
		}
	}
}

// TestHedgeOfAnAttemptOnAPausedProcessGoesToAnotherAddress: one of four
// backends is a process paused with SIGSTOP, over HTTP/1.1 with hedging.
// Every operation is answered by a running backend, and no operation
// sends two attempts to one address: the hedge of an attempt stuck on the
// paused process goes elsewhere, before AttemptTimeout could cut it.
func TestHedgeOfAnAttemptOnAPausedProcessGoesToAnotherAddress(t *testing.T) {
	paused := loopback[3]
	proc := startBackendProcess(t, paused)
	startInProcessBackends(t, loopback[:3], proc.port)
	proc.signal(t, syscall.SIGSTOP)
	sp := &spread.Transport{
		Resolver: spreadtest.NewResolver(loopback...),
		New: func() *http.Transport {
			tr := cleanhttp.DefaultPooledTransport()
			tr.Proxy = nil
			return tr
		},
	}
	defer sp.CloseIdleConnections()
	const attemptTimeout = time.Minute
	rt := &httpretry.Transport{Base: sp, MaxAttempts: 2, AttemptTimeout: attemptTimeout,
		Budget:  httpretry.NewTokenBucket(1000, 1),
		Hedging: &httpretry.Hedging{Delay: 20 * time.Millisecond, MaxExtraLoad: 0.99}}
	url := fmt.Sprintf("http://spread.test:%d/", proc.port)
	pausedAt := netip.AddrPortFrom(paused, uint16(proc.port)).String()
	reached := 0
	for op := range 40 {
		var seen remotes
		ctx := httptrace.WithClientTrace(context.Background(), seen.trace())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		start := time.Now()
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatalf("op %d: %v", op, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || string(b) == paused.String() {
			t.Fatalf("op %d: %d %q %v, want 200 from a running backend", op, resp.StatusCode, b, err)
		}
		seen.mu.Lock()
		addrs := slices.Clone(seen.addrs)
		seen.mu.Unlock()
		for _, a := range addrs {
			if seen.count(a) > 1 {
				t.Fatalf("op %d: connections %v: two attempts to %s", op, addrs, a)
			}
		}
		if seen.count(pausedAt) == 1 {
			reached++
			if d := time.Since(start); d >= attemptTimeout {
				t.Fatalf("op %d took %v: it waited for AttemptTimeout, not the hedge", op, d)
			}
		}
	}
	if reached == 0 {
		t.Fatal("no operation reached the paused process: the test proves nothing")
	}
}
