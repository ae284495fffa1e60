package httpretry

import (
	"bytes"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
)

// newLoopbackServer starts a server on 127.0.0.1 speaking HTTP/2 over TLS
// (h2) or plain HTTP/1.1, closed with the test. Its Client's Transport is
// the Base to test with: it trusts the server's certificate.
func newLoopbackServer(t *testing.T, h2 bool, h http.Handler) *httptest.Server {
	t.Helper()
	srv := newUnstartedServer(h)
	if h2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// newUnstartedServer is httptest.NewUnstartedServer with a quiet error
// log: see handshakeFilter.
func newUnstartedServer(h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(handshakeFilter{}, "", log.LstdFlags)
	return srv
}

// handshakeFilter drops the "http: TLS handshake error" lines a TLS test
// server logs whenever a client closes a connection before its handshake
// ends: a Transport dialing a spare connection it no longer needs, a
// server closed with the test. No test asserts on them, and dozens of
// them hid a failing test's lines in the output. Every other line (a
// handler's panic, which net/http recovers and logs) goes to stderr.
type handshakeFilter struct{}

func (handshakeFilter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("http: TLS handshake error")) {
		return len(p), nil
	}
	return os.Stderr.Write(p)
}

// serverBase returns srv's client transport, whose idle connections are
// closed with the test.
func serverBase(t *testing.T, srv *httptest.Server) *http.Transport {
	t.Helper()
	base := srv.Client().Transport.(*http.Transport)
	t.Cleanup(base.CloseIdleConnections)
	return base
}

// protocols names the two wire protocols the network tests run over.
var protocols = []struct {
	name string
	h2   bool
}{{"HTTP/1.1", false}, {"HTTP/2", true}}
