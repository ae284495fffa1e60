package spread_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-cleanhttp"

	"github.com/httpretry/httpretry/spread"
	"github.com/httpretry/httpretry/spread/spreadtest"
)

// misdirectingServer answers 421 to every request of a pooled connection,
// and holds each request of a connection that will not be reused
// ("Connection: close", as a resend on a fresh connection asks) until
// released, then answers 200.
type misdirectingServer struct {
	srv     *http.Server
	release chan struct{}
	held    atomic.Int64
}

// connCounter counts the connections a dialer opened that are still
// open, and the most at once, on the client's side: a server sees a close
// a moment after the client made it.
type connCounter struct {
	mu      sync.Mutex
	open    int
	maxOpen int
}

func (c *connCounter) dial(ctx context.Context, network, address string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open++
	c.maxOpen = max(c.maxOpen, c.open)
	return &countedConn{Conn: conn, c: c}, nil
}

type countedConn struct {
	net.Conn
	c    *connCounter
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() {
		c.c.mu.Lock()
		c.c.open--
		c.c.mu.Unlock()
	})
	return c.Conn.Close()
}

func startMisdirectingServer(t *testing.T, ip string) (*misdirectingServer, int) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skipf("cannot listen on %s here: %v", ip, err)
	}
	s := &misdirectingServer{release: make(chan struct{})}
	s.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !r.Close {
				w.WriteHeader(http.StatusMisdirectedRequest)
				return
			}
			s.held.Add(1)
			<-s.release
			io.WriteString(w, "ok")
		}),
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.srv.Serve(ln) }()
	t.Cleanup(func() { s.srv.Close(); wg.Wait() })
	return s, ln.Addr().(*net.TCPAddr).Port
}

// TestMisdirectedResendsKeepTheConnectionBound: with MaxConnsPerHost 1,
// eight requests at once get a 421 each from an address's one pooled
// connection. Their resends on fresh connections go one at a time: the
// address never has more than its pooled connection and one fresh one
// open, and every request is answered.
func TestMisdirectedResendsKeepTheConnectionBound(t *testing.T) {
	s, port := startMisdirectingServer(t, "127.0.0.2")
	var conns connCounter
	sp := &spread.Transport{
		Resolver: spreadtest.NewResolver(loopback[0]),
		New: func() *http.Transport {
			tr := cleanhttp.DefaultPooledTransport()
			tr.Proxy = nil
			tr.MaxConnsPerHost = 1
			tr.DialContext = conns.dial
			return tr
		},
	}
	defer sp.CloseIdleConnections()
	const n = 8
	errs := make(chan error, n)
	for range n {
		go func() {
			resp, err := sp.RoundTrip(mustRequest(t, fmt.Sprintf("http://spread.test:%d/", port)))
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode != 200 {
					err = fmt.Errorf("status %d, want 200", resp.StatusCode)
				}
			}
			errs <- err
		}()
	}
	// Resends that were not held back reach the server within this wait,
	// however loaded the machine, only by chance slower: the bound is
	// checked on what did arrive.
	deadline := time.Now().Add(2 * time.Second)
	for s.held.Load() < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	close(s.release)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	conns.mu.Lock()
	defer conns.mu.Unlock()
	if conns.maxOpen > 2 {
		t.Fatalf("%d connections open at once, want at most 2: the pooled one and one fresh", conns.maxOpen)
	}
}

func mustRequest(t *testing.T, rawURL string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
