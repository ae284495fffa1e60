package httptestutil

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"
)

// Server is an [httptest.Server] whose n-th request takes the n-th [Step]
// of its script: after the script runs out, the last step repeats, and an
// empty script answers 200 with an empty body. It exercises a client's real
// connection handling, which a [Transport] cannot: pooling, resets,
// truncated bodies, HTTP/2 stream aborts.
//
// Besides the requests, a Server counts connections, so that a test can
// prove a client drained a response well enough for its connection to be
// reused. Its error log is discarded: the aborts it scripts would
// otherwise fill the test output.
//
// Most tests start one with [NewServer] or [NewTLSServer], defer Close and
// talk to URL with Client(). A Server is safe for concurrent use by
// multiple goroutines.
type Server struct {
	*httptest.Server

	script    script
	closing   chan struct{} // closed by Close, to release waiting handlers
	closeOnce sync.Once

	mu       sync.Mutex // protects newConns and open
	newConns int
	open     map[net.Conn]bool
}

// NewServer starts and returns a Server speaking HTTP/1.1 that follows
// steps.
func NewServer(steps ...Step) *Server {
	s := newServer(steps)
	s.Start()
	return s
}

// NewTLSServer starts and returns a Server speaking TLS with HTTP/2
// enabled, that follows steps. Its Client() speaks HTTP/2, so the aborts
// arrive as stream resets rather than closed connections.
func NewTLSServer(steps ...Step) *Server {
	s := newServer(steps)
	s.EnableHTTP2 = true
	s.StartTLS()
	return s
}

func newServer(steps []Step) *Server {
	s := &Server{
		script:  script{steps: slices.Clone(steps)},
		closing: make(chan struct{}),
		open:    make(map[net.Conn]bool),
	}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	// httptest wraps this hook with its own, so both see every change.
	s.Config.ConnState = s.connState
	return s
}

// Hits reports how many requests the Server has received.
func (s *Server) Hits() int { return s.script.hits() }

// Requests returns copies of the recorded requests, in arrival order.
func (s *Server) Requests() []Request { return s.script.requests() }

// NewConns reports how many connections the Server has accepted: a client
// that reuses its connections makes fewer of them than requests.
func (s *Server) NewConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newConns
}

// OpenConns reports how many connections are open: accepted and neither
// closed nor hijacked, whether new, active or idle.
func (s *Server) OpenConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}

// Close releases every Hang, Trickle or Delay step in progress, aborting
// its request, then closes every client connection and the server. It
// does not wait for clients to let go: httptest.Server.Close alone would
// wait for every active connection, which a test that failed midway may
// never release. Close may be called more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.closing) })
	// Stop accepting first, so that no connection opens after the ones
	// closed below; httptest ignores closing the listener again.
	s.Listener.Close()
	s.CloseClientConnections()
	s.Server.Close()
}

func (s *Server) connState(c net.Conn, state http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch state {
	case http.StateNew:
		s.newConns++
		s.open[c] = true
	case http.StateHijacked, http.StateClosed:
		delete(s.open, c)
	}
}

// serve records the request, then plays its step. Every step that cannot
// finish because the client left or the server is closing aborts with
// http.ErrAbortHandler: returning would send a 200 the script never asked
// for.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	// A body cut short is recorded as far as it got: the step still runs,
	// as it would on a server that ignores the body.
	data, _ := readBody(r.Body)
	step := s.script.take(r, data)
	ctx := r.Context()
	if !s.pause(ctx, step.Delay) {
		panic(http.ErrAbortHandler)
	}
	switch step.Action {
	case Respond:
		writeHeader(w, step, len(step.Body) > 0)
		io.WriteString(w, step.Body)
	case CloseConn:
		s.closeConn(w, r)
	case Hang:
		select {
		case <-ctx.Done():
		case <-s.closing:
		}
		panic(http.ErrAbortHandler)
	case Trickle:
		s.trickle(w, r, step)
	case ResetBody:
		s.resetBody(w, r, step)
	default:
		http.Error(w, fmt.Sprintf("httptestutil: unknown Action %d", step.Action), http.StatusInternalServerError)
	}
}

// pause waits d in real time. It reports false if the client left or the
// server is closing first.
func (s *Server) pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.closing:
		return false
	}
}

// closeConn closes the request's connection without a response. HTTP/2
// cannot hijack a stream; aborting the handler resets the stream instead,
// which is what an HTTP/2 client sees of a crashed handler.
func (s *Server) closeConn(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 2 {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}

// trickle sends the body one byte per Interval, flushing each so that the
// client sees them arrive one by one.
func (s *Server) trickle(w http.ResponseWriter, r *http.Request, step Step) {
	writeHeader(w, step, true)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		panic(http.ErrAbortHandler)
	}
	for i := range len(step.Body) {
		if !s.pause(r.Context(), step.interval()) {
			panic(http.ErrAbortHandler)
		}
		if _, err := io.WriteString(w, step.Body[i:i+1]); err != nil {
			panic(http.ErrAbortHandler)
		}
		if err := rc.Flush(); err != nil {
			panic(http.ErrAbortHandler)
		}
	}
}

// resetBody sends the head and half the body, then drops the connection.
// On HTTP/1 it writes the response itself on the hijacked connection, so
// that it can close it with SO_LINGER 0: the kernel then sends a TCP RST,
// and the client reads ECONNRESET rather than a clean end of stream.
func (s *Server) resetBody(w http.ResponseWriter, r *http.Request, step Step) {
	half := step.Body[:len(step.Body)/2]
	if r.ProtoMajor == 2 {
		writeHeader(w, step, true)
		io.WriteString(w, half)
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	code := step.status()
	fmt.Fprintf(brw, "HTTP/1.1 %d %s\r\n", code, http.StatusText(code))
	step.header(true).Write(brw)
	brw.WriteString("\r\n" + half)
	brw.Flush()
	// Under TLS, reset the TCP connection beneath: closing the tls.Conn
	// would send a close_notify alert first, a clean end.
	if nc, ok := conn.(interface{ NetConn() net.Conn }); ok {
		conn = nc.NetConn()
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// writeHeader sends the step's status and headers.
func writeHeader(w http.ResponseWriter, step Step, withLength bool) {
	h := w.Header()
	for k, v := range step.header(withLength) {
		h[k] = v
	}
	w.WriteHeader(step.status())
}
