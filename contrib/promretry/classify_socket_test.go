package promretry

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
)

// TestAttemptResultOverRealConnections sends one attempt to a real
// loopback server for each failure an operator must tell apart, over
// HTTP/1.1 and HTTP/2, and checks the result label it is counted under:
// a connection or stream cut by the server is a connection_error, as a
// refused connection and a failed TLS handshake are, never "other".
func TestAttemptResultOverRealConnections(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	hang := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	abort := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })
	status := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("s"))
		w.WriteHeader(code)
	})
	serve := func(t *testing.T, h http.Handler, h2 bool) loopServer {
		t.Helper()
		srv := httptest.NewUnstartedServer(h)
		srv.Config.ErrorLog = nil
		if h2 {
			srv.EnableHTTP2 = true
			srv.StartTLS()
		} else {
			srv.Start()
		}
		t.Cleanup(srv.Close)
		base := srv.Client().Transport.(*http.Transport).Clone()
		t.Cleanup(base.CloseIdleConnections)
		return loopServer{srv.URL, base}
	}
	refusedURL := func(t *testing.T) string {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return "http://" + addr
	}
	tests := []struct {
		name                        string
		h2                          bool
		h                           http.Handler
		url                         func(t *testing.T, s loopServer) string
		attemptTimeout, idleTimeout time.Duration
		result                      string
	}{
		{name: "429 h1", h: status, url: query("429"), result: "429"},
		{name: "529 h2", h2: true, h: status, url: query("529"), result: "529"},
		{name: "503 h1", h: status, url: query("503"), result: "5xx"},
		{name: "404 h2", h2: true, h: status, url: query("404"), result: "4xx"},
		{name: "connection cut h1", h: abort, result: "connection_error"},
		{name: "stream reset h2", h2: true, h: abort, result: "connection_error"},
		{name: "connection refused", h: status, url: func(t *testing.T, _ loopServer) string { return refusedURL(t) }, result: "connection_error"},
		{name: "TLS to a plain server", h: status,
			url: func(_ *testing.T, s loopServer) string { return "https" + s.url[len("http"):] }, result: "connection_error"},
		{name: "attempt timeout h1", h: hang, attemptTimeout: 50 * time.Millisecond, result: "timeout"},
		{name: "idle timeout h2", h2: true, h: hang, idleTimeout: 50 * time.Millisecond, result: "idle_timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := serve(t, tt.h, tt.h2)
			url := s.url
			if tt.url != nil {
				url = tt.url(t, s)
			}
			c, reg := newCollector(t, Options{Route: func(*http.Request) string { return "/r" }})
			tr := &httpretry.Transport{Base: s.base, MaxAttempts: 1,
				AttemptTimeout: tt.attemptTimeout, IdleTimeout: tt.idleTimeout}
			c.Instrument(tr)
			req := mustRequest(t, context.Background(), "GET", url)
			if resp, err := tr.RoundTrip(req); err == nil {
				resp.Body.Close()
			}
			checkFamily(t, samples(scrape(t, reg)), "httpretry_attempts_total", map[string]float64{
				`httpretry_attempts_total{kind="initial",method="GET",result="` + tt.result + `",route="/r"}`: 1,
			})
		})
	}
}

// loopServer is a loopback test server and a client transport for it.
type loopServer struct {
	url  string
	base http.RoundTripper
}

// query returns a URL function asking the status server for code.
func query(code string) func(*testing.T, loopServer) string {
	return func(_ *testing.T, s loopServer) string { return s.url + "/?s=" + code }
}
