package spread_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"github.com/hashicorp/go-cleanhttp"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/spread"
	"github.com/httpretry/httpretry/spread/spreadtest"
)

// TestRequestThroughAProxyIsNotResolvedNorSpread: New's Transport sends
// requests through a proxy (as cleanhttp's does when HTTP_PROXY is set),
// and the client's own DNS cannot resolve the host, as behind many
// corporate proxies. The request goes to the proxy, which alone resolves
// the host: the resolver is never asked, and the retry of a proxy's
// failure goes to the proxy again.
func TestRequestThroughAProxyIsNotResolvedNorSpread(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, r.URL.String())
		if len(asked) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "via proxy")
	}))
	defer proxy.Close()
	proxyURL, _ := url.Parse(proxy.URL)
	r := spreadtest.NewResolver()
	r.Fail(errors.New("no such host"))
	sp := &spread.Transport{
		Resolver: r,
		New: func() *http.Transport {
			tr := cleanhttp.DefaultPooledTransport()
			tr.Proxy = http.ProxyURL(proxyURL)
			return tr
		},
	}
	defer sp.CloseIdleConnections()
	rt := &httpretry.Transport{Base: sp, MaxAttempts: 2, Jitter: noWait}
	req, _ := http.NewRequest(http.MethodGet, "http://internal.example:8080/books", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "via proxy" {
		t.Fatalf("%d %q, want 200 from the proxy", resp.StatusCode, b)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 || asked[0] != "http://internal.example:8080/books" || asked[1] != asked[0] {
		t.Fatalf("the proxy was asked %q, want the URL twice", asked)
	}
	if n := r.Lookups.Load(); n != 0 {
		t.Fatalf("%d lookups, want none: the proxy resolves", n)
	}
}
