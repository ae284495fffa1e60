// Package fake runs loopback fakes of the APIs the SDK examples call and
// records what each SDK sent: method, path, headers, body and arrival time
// of every request.
package fake

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// Request is what a [Server] recorded of one request.
type Request struct {
	Method   string
	Path     string
	RawQuery string
	Header   http.Header // a clone
	Body     []byte      // read in full before the handler runs
	At       time.Time   // when the request's body had been read
}

// Respond answers the hit-th request (1-based). r.Body holds the bytes
// already recorded, so that a handler may read it again.
type Respond func(w http.ResponseWriter, r *http.Request, hit int)

// Server is an [httptest.Server] on 127.0.0.1 that records every request
// and answers it with its Respond function. Close it when done; Close
// waits for handlers still running, so a handler that blocks must return
// when its request's context ends.
//
// A Server is safe for concurrent use.
type Server struct {
	*httptest.Server

	respond Respond

	mu   sync.Mutex // protects reqs
	reqs []Request
}

// NewServer starts a Server that answers with respond.
func NewServer(respond Respond) *Server {
	s := &Server{respond: respond}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		// The client went away mid-body: nothing was applied.
		return
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, Request{
		Method:   r.Method,
		Path:     r.URL.Path,
		RawQuery: r.URL.RawQuery,
		Header:   r.Header.Clone(),
		Body:     body,
		At:       time.Now(),
	})
	hit := len(s.reqs)
	s.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	s.respond(w, r, hit)
}

// Requests returns a copy of the requests recorded so far, in arrival
// order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Hits returns the number of requests recorded so far.
func (s *Server) Hits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// Gaps returns the time between each request's arrival and the next's:
// len(reqs)-1 values.
func Gaps(reqs []Request) []time.Duration {
	var gaps []time.Duration
	for i := 1; i < len(reqs); i++ {
		gaps = append(gaps, reqs[i].At.Sub(reqs[i-1].At))
	}
	return gaps
}

// SameBodies reports whether every request carried the same body as the
// first.
func SameBodies(reqs []Request) bool {
	for _, r := range reqs[min(1, len(reqs)):] {
		if !bytes.Equal(r.Body, reqs[0].Body) {
			return false
		}
	}
	return true
}

// Distinct returns the distinct values of header name across reqs, in
// order of first appearance; a request without it contributes "".
func Distinct(reqs []Request, name string) []string {
	var vals []string
	seen := make(map[string]bool)
	for _, r := range reqs {
		v := r.Header.Get(name)
		if !seen[v] {
			seen[v] = true
			vals = append(vals, v)
		}
	}
	return vals
}

// Hang blocks until the client abandons r or the server closes: a server
// that accepted the request and never answers.
func Hang(r *http.Request) {
	<-r.Context().Done()
}
