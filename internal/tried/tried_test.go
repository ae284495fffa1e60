package tried

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

type marked struct {
	marker
	http.RoundTripper
}

type marker = Marker

// TestWantsOnlyAMarkedRoundTripper: a RoundTripper that embeds the Marker
// wants a Set, a plain one or a nil one does not.
func TestWantsOnlyAMarkedRoundTripper(t *testing.T) {
	if !Wants(nil, &marked{}) {
		t.Error("Wants(nil, marked) = false, want true")
	}
	if Wants(http.DefaultTransport, nil) {
		t.Error("Wants(plain, nil) = true, want false")
	}
}

// TestSetIsSharedByEveryAttemptOfTheOperation: a context derived from the
// operation's (an attempt's) carries the same Set, and what one attempt
// adds the next sees, concurrent adds included; a context without one
// carries nil.
func TestSetIsSharedByEveryAttemptOfTheOperation(t *testing.T) {
	if s := From(context.Background()); s != nil {
		t.Fatalf("From(Background) = %v, want nil", s)
	}
	op := With(context.Background())
	attempt, cancel := context.WithCancel(op)
	defer cancel()
	var wg sync.WaitGroup
	for _, a := range []string{"127.0.0.2:80", "127.0.0.3:80", "127.0.0.2:80"} {
		wg.Add(1)
		go func() { defer wg.Done(); From(attempt).Add(a) }()
	}
	wg.Wait()
	s := From(op)
	if got := s.Len(); got != 2 {
		t.Errorf("Len() = %d, want 2 distinct addresses", got)
	}
	if !s.Has("127.0.0.3:80") || s.Has("127.0.0.4:80") {
		t.Errorf("Has: got %v %v, want true false", s.Has("127.0.0.3:80"), s.Has("127.0.0.4:80"))
	}
}

// TestConnTraceRecordsTheAddressReached: a request whose context carries
// the connection trace adds the address its connection reached to the
// Set, as host:port, once however many requests reuse the connection.
func TestConnTraceRecordsTheAddressReached(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()
	s := new(Set)
	for range 2 {
		req, _ := http.NewRequestWithContext(WithConnTrace(context.Background(), s), http.MethodGet, srv.URL, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	want := strings.TrimPrefix(srv.URL, "http://")
	if s.Len() != 1 || !s.Has(want) {
		t.Fatalf("set has %d addresses, want only %s", s.Len(), want)
	}
}
