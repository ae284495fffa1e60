package spread_test

import (
	"io"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"testing"

	"github.com/hashicorp/go-cleanhttp"

	"github.com/httpretry/httpretry/internal/leakcheck"
	"github.com/httpretry/httpretry/spread"
	"github.com/httpretry/httpretry/spread/spreadtest"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(backendProcessEnv); addr != "" {
		serveBackendProcess(addr)
		return
	}
	leakcheck.Main(m)
}

// loopback is the four addresses the backends listen on.
var loopback = []netip.Addr{
	netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3"),
	netip.MustParseAddr("127.0.0.4"), netip.MustParseAddr("127.0.0.5"),
}

// opLog records which backends each operation's requests reached, by the
// operation's X-Op header, in order.
type opLog struct {
	mu  sync.Mutex
	ops map[string][]int
}

func (l *opLog) record(b *spreadtest.Backend, r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ops == nil {
		l.ops = make(map[string][]int)
	}
	op := r.Header.Get("X-Op")
	l.ops[op] = append(l.ops[op], b.Index)
}

func (l *opLog) backends(op string) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int(nil), l.ops[op]...)
}

// startGroup starts four backends on 127.0.0.2-5 behind one hostname. On
// a system where they cannot listen (not Linux) the test is skipped, but
// not in CI.
func startGroup(t *testing.T, opt spreadtest.Options) *spreadtest.Group {
	t.Helper()
	g, err := spreadtest.Start(loopback, opt)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skipf("cannot listen on 127.0.0.2-5 here: %v", err)
	}
	t.Cleanup(g.Close)
	return g
}

// newSpread returns a spread Transport for g: its resolver, and per
// address a pooled Transport that trusts g's certificate, with no proxy.
func newSpread(t *testing.T, g *spreadtest.Group) *spread.Transport {
	t.Helper()
	sp := &spread.Transport{
		Resolver: g.Resolver,
		New: func() *http.Transport {
			tr := cleanhttp.DefaultPooledTransport()
			tr.Proxy = nil
			tr.TLSClientConfig = g.TLSConfig()
			return tr
		},
	}
	t.Cleanup(sp.CloseIdleConnections)
	return sp
}

// getOp sends a GET of path to g through rt, with op as its X-Op header,
// and returns the status and body, or the error.
func getOp(t *testing.T, rt http.RoundTripper, g *spreadtest.Group, op string) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, g.URL+"/op", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Op", op)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}
