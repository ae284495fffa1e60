package httptestutil

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Action says what a [Step] does with the request that takes it.
type Action int

// The actions a [Step] can take. Each imitates one way a real server or
// network treats a request, so that a retry decision can be tested against
// it.
const (
	// Respond answers with Status, Header and Body, after Delay.
	Respond Action = iota
	// CloseConn reads the request, then closes the connection without any
	// response: the failure a client sees when a server crashes or an idle
	// connection is closed under it.
	CloseConn
	// Hang never answers: it blocks until the client gives up (the request
	// context ends) or the server is closed.
	Hang
	// Trickle sends the headers, with Content-Length = len(Body), then Body
	// one byte per Interval, flushing each, until done or the client goes
	// away: a slow body that only a timeout covering the body can catch.
	Trickle
	// ResetBody sends the headers, with Content-Length = len(Body), and the
	// first half of Body, then drops the connection (a TCP RST where
	// possible): a failure after the response has been handed to the
	// caller, which no retry layer may paper over.
	ResetBody
)

// defaultInterval is a Trickle step's Interval when it is 0: slow enough to
// trip a short timeout, fast enough for a test to wait out a short body.
const defaultInterval = 10 * time.Millisecond

// maxRecordedBody bounds the request body a [Request] keeps, so that a test
// streaming a large upload does not hold it all in memory.
const maxRecordedBody = 10 << 20

// Step is one scripted reaction to one request. The zero Step answers 200
// with no body and no delay.
type Step struct {
	// Action is what the step does. The zero value is Respond.
	Action Action

	// Status is the response status code. 0 means 200.
	Status int

	// Header is copied into the response headers. If nil, only the
	// headers the step itself sets are sent.
	Header http.Header

	// Body is the response body. Trickle and ResetBody declare its full
	// length in Content-Length even though they never send all of it.
	Body string

	// RetryAfter, when non-empty, sets the Retry-After header, so that
	// tests need not spell out a Header for the common case.
	RetryAfter string

	// Delay is a wait before the step acts. A Server waits in real time
	// and gives up when the client leaves or the server is closed; a
	// Transport waits on its Clock and gives up when the request context
	// ends. 0 means no wait at all, so no fake-clock timer is created.
	Delay time.Duration

	// Interval is the time between the bytes of a Trickle body. 0 means
	// 10ms.
	Interval time.Duration

	// Err, used by Transport only, is returned (after Delay) instead of a
	// response, whatever the Action. A Server cannot return an error; use
	// CloseConn or ResetBody there. If nil, the Action decides.
	Err error
}

// status resolves Step.Status's zero value.
func (s Step) status() int {
	if s.Status == 0 {
		return http.StatusOK
	}
	return s.Status
}

// interval resolves Step.Interval's zero value.
func (s Step) interval() time.Duration {
	if s.Interval <= 0 {
		return defaultInterval
	}
	return s.Interval
}

// header builds the response headers: a copy of Header, so that a response
// never aliases the script, plus Retry-After and, when withLength is set,
// a Content-Length for the whole Body unless Header already has one (a test
// may want a lying length).
func (s Step) header(withLength bool) http.Header {
	h := s.Header.Clone()
	if h == nil {
		h = make(http.Header)
	}
	if s.RetryAfter != "" {
		h.Set("Retry-After", s.RetryAfter)
	}
	if withLength && h.Get("Content-Length") == "" {
		h.Set("Content-Length", strconv.Itoa(len(s.Body)))
	}
	return h
}

// Request is what a scripted [Server] or [Transport] recorded of one
// request.
type Request struct {
	Method   string
	Path     string
	RawQuery string
	Header   http.Header // a clone
	Body     []byte      // read in full (bounded: at most 10 MiB are kept)
	Hit      int         // 1-based arrival number
}

// ErrRefused and ErrReset are the errors a [Transport] step sets as Err to
// imitate the two network failures a retry layer must tell apart. Both
// unwrap to their syscall errno, so errors.Is(err, syscall.ECONNREFUSED)
// holds as it does for a real dial error.
var (
	// ErrRefused is a dial error: the request never left, so even a
	// non-idempotent request may be sent again.
	ErrRefused = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	// ErrReset is a reset after the request may have been sent.
	ErrReset = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
)

// errClosedConn is what a Transport returns for CloseConn. net/http reports
// a connection closed before any response as io.EOF, wrapped; classifiers
// look for that with errors.Is.
var errClosedConn = fmt.Errorf("httptestutil: server closed the connection: %w", io.EOF)

// errReadAfterClose mirrors net/http's error for reading a closed body.
var errReadAfterClose = errors.New("httptestutil: read on closed response body")

// script hands out a Server's or Transport's steps in order and records
// the requests that took them. It is safe for concurrent use.
type script struct {
	steps []Step

	mu   sync.Mutex // protects reqs
	reqs []Request
}

// take records one request, with the body already read, and returns the
// step it takes.
func (s *script) take(r *http.Request, body []byte) Step {
	step, hit := s.takeStep(r)
	s.recordBody(hit, body)
	return step
}

// takeStep records one request without its body and returns the step it
// takes and its 1-based arrival number. The arrival number and the step
// are chosen under one lock, so that concurrent requests take distinct
// steps. After the last step, the last step repeats; an empty script
// answers with the zero Step.
func (s *script) takeStep(r *http.Request) (Step, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hit := len(s.reqs) + 1
	s.reqs = append(s.reqs, Request{
		Method:   r.Method,
		Path:     r.URL.Path,
		RawQuery: r.URL.RawQuery,
		Header:   r.Header.Clone(),
		Hit:      hit,
	})
	if len(s.steps) == 0 {
		return Step{}, hit
	}
	return s.steps[min(hit, len(s.steps))-1], hit
}

// recordBody stores the body of the hit-th request.
func (s *script) recordBody(hit int, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs[hit-1].Body = body
}

// neverSent reports whether a step's error says the request never left
// the client (a failed dial, as [ErrRefused]): a real transport has then
// not read a byte of the request body.
func (s Step) neverSent() bool {
	var op *net.OpError
	return errors.As(s.Err, &op) && op.Op == "dial"
}

// contentLength returns the response's Content-Length: the step's own
// header when it sets a valid one, even a false one, else the body's
// length. A false length means the same to both fakes: the body ends in
// io.ErrUnexpectedEOF when the length promised more than arrived.
func (s Step) contentLength() int64 {
	if v := s.Header.Get("Content-Length"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			return n
		}
	}
	return int64(len(s.Body))
}

// hits reports how many requests took a step.
func (s *script) hits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// requests returns copies of the recorded requests. The headers and bodies
// are copied too, so a caller may change them freely.
func (s *script) requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.reqs)
	for i := range out {
		out[i].Header = out[i].Header.Clone()
		out[i].Body = bytes.Clone(out[i].Body)
	}
	return out
}

// readBody reads a request body in full, as a real server or transport
// would, keeping at most maxRecordedBody bytes of it. A nil body reads as
// empty.
func readBody(body io.Reader) ([]byte, error) {
	if body == nil {
		return nil, nil
	}
	kept, err := io.ReadAll(io.LimitReader(body, maxRecordedBody))
	if err != nil {
		return kept, err
	}
	_, err = io.Copy(io.Discard, body)
	return kept, err
}
