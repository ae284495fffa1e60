package httpretry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"syscall"
	"testing"
)

// timeoutErr is a net.Error that timed out, like a dial or header timeout.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

var (
	errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	errReset   = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
)

func TestIsTransientStatus(t *testing.T) {
	t.Parallel()
	keyed := &http.Request{Header: http.Header{IdempotencyKeyHeader: {"k"}}}
	xkeyed := &http.Request{Header: http.Header{"X-Idempotency-Key": {"k"}}}
	plain := &http.Request{Header: http.Header{}}
	tests := []struct {
		status int
		req    *http.Request
		want   bool
	}{
		{200, plain, false}, {201, plain, false}, {204, plain, false}, {301, plain, false},
		{304, plain, false}, {400, plain, false}, {401, plain, false}, {403, plain, false},
		{404, plain, false}, {405, plain, false}, {408, plain, true}, {409, plain, false},
		{409, nil, false}, {409, keyed, false}, {409, xkeyed, false}, {400, keyed, false},
		{422, keyed, false}, {429, plain, true}, {500, plain, true}, {501, plain, false},
		{502, plain, true}, {503, plain, true}, {504, plain, true}, {505, plain, false},
		{529, plain, true}, {530, plain, false},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%d", tt.status)
		if tt.req != nil && len(tt.req.Header) > 0 {
			name += " with key"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			resp := &http.Response{StatusCode: tt.status, Request: tt.req}
			if got := IsTransient(resp, nil); got != tt.want {
				t.Errorf("IsTransient(%d) = %v; want %v", tt.status, got, tt.want)
			}
		})
	}
	if IsTransient(nil, nil) {
		t.Error("IsTransient(nil, nil) = true; want false")
	}
}

// A 409 is transient only as an idempotency layer's "the first request with
// this key is still running": keyed, with Retry-After, and not a replay. A
// handler's own conflict, first answered or replayed, is final.
func TestBusinessConflictIsFinal(t *testing.T) {
	t.Parallel()
	keyed := &http.Request{Header: http.Header{IdempotencyKeyHeader: {"k"}}}
	xkeyed := &http.Request{Header: http.Header{"X-Idempotency-Key": {"k"}}}
	plain := &http.Request{Header: http.Header{}}
	tests := []struct {
		name   string
		req    *http.Request
		header http.Header
		want   bool
	}{
		{"in progress", keyed, http.Header{"Retry-After": {"1"}}, true},
		{"in progress, X-Idempotency-Key", xkeyed, http.Header{"Retry-After": {"1"}}, true},
		{"in progress, Retry-After-Ms", keyed, http.Header{"Retry-After-Ms": {"500"}}, true},
		{"in progress, X-Amz-Retry-After", keyed, http.Header{"X-Amz-Retry-After": {"500"}}, true},
		{"in progress, Replayed false", keyed, http.Header{"Retry-After": {"1"}, "Idempotent-Replayed": {"false"}}, true},
		{"business conflict", keyed, http.Header{"Content-Type": {"application/json"}}, false},
		{"business conflict, no header", keyed, nil, false},
		{"replayed business conflict", keyed, http.Header{"Idempotent-Replayed": {"true"}}, false},
		{"replayed with Retry-After", keyed, http.Header{"Retry-After": {"1"}, "Idempotent-Replayed": {" TRUE "}}, false},
		{"no key", plain, http.Header{"Retry-After": {"1"}}, false},
		{"no request", nil, http.Header{"Retry-After": {"1"}}, false},
		{"server says retry", keyed, http.Header{"Stripe-Should-Retry": {"true"}}, true},
		{"server says no", keyed, http.Header{"Retry-After": {"1"}, "X-Should-Retry": {"false"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp := &http.Response{StatusCode: http.StatusConflict, Request: tt.req, Header: tt.header}
			if got := IsTransient(resp, nil); got != tt.want {
				t.Errorf("IsTransient(409, %v) = %v; want %v", tt.header, got, tt.want)
			}
		})
	}
}

func TestIsTransientError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", errRefused, true},
		{"connection reset", errReset, true},
		{"broken pipe", &net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.EPIPE)}, true},
		{"connection aborted", syscall.ECONNABORTED, true},
		{"unexpected EOF", io.ErrUnexpectedEOF, true},
		{"server closed connection", fmt.Errorf("net/http: %w", io.EOF), true},
		{"server closed idle connection", errors.New("http: server closed idle connection"), true},
		{"transport connection broken", errors.New("net/http: HTTP/1.x transport connection broken: write: bad"), true},
		{"network timeout", timeoutErr{}, true},
		{"attempt timeout", &attemptTimeoutError{err: context.DeadlineExceeded}, true},
		{"DNS timeout", &net.DNSError{Err: "timeout", Name: "x", IsTimeout: true}, true},
		{"caller canceled", context.Canceled, false},
		{"caller deadline", context.DeadlineExceeded, false},
		{"caller canceled wrapped in url.Error", &url.Error{Op: "Get", URL: "http://x", Err: context.Canceled}, false},
		{"DNS not found", &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "nope.invalid", IsNotFound: true}}, false},
		{"unknown authority", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, false},
		{"hostname mismatch", x509.HostnameError{Host: "x"}, false},
		{"unsupported scheme", errors.New(`unsupported protocol scheme "ftp"`), false},
		{"no host", errors.New("http: no Host in request URL"), false},
		{"malformed URL", &url.Error{Op: "parse", URL: "::", Err: errors.New("missing protocol scheme")}, false},
		{"unknown error", errors.New("something odd"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := IsTransient(nil, tt.err); got != tt.want {
				t.Errorf("IsTransient(%v) = %v; want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestNeverSent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"dial refused", errRefused, true},
		{"dial DNS", &net.OpError{Op: "dial", Err: &net.DNSError{IsNotFound: true}}, true},
		{"read reset", errReset, false},
		{"EOF", io.EOF, false},
		{"attempt timeout", &attemptTimeoutError{err: context.DeadlineExceeded}, false},
		{"unknown", errors.New("odd"), false},
		{"unsupported scheme", errors.New(`unsupported protocol scheme "ftp"`), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest("POST", "http://api.test/charges", nil)
			if got := neverSent(req, tt.err); got != tt.want {
				t.Errorf("neverSent(%v) = %v; want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestErrorClass(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{&attemptTimeoutError{err: context.DeadlineExceeded}, "attempt_timeout"},
		{context.Canceled, "canceled"},
		{context.DeadlineExceeded, "deadline_exceeded"},
		{errRefused, "connection_refused"},
		{errReset, "connection_reset"},
		{syscall.EPIPE, "broken_pipe"},
		{io.ErrUnexpectedEOF, "eof"},
		{&net.DNSError{IsNotFound: true}, "dns"},
		{&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, "tls"},
		{errors.New(`unsupported protocol scheme "ftp"`), "invalid_request"},
		{timeoutErr{}, "timeout"},
		{&url.Error{Op: "Get", URL: "http://u:secret@x/?token=s", Err: errors.New("odd")}, "other"},
	}
	for _, tt := range tests {
		if got := ErrorClass(tt.err); got != tt.want {
			t.Errorf("ErrorClass(%v) = %q; want %q", tt.err, got, tt.want)
		}
	}
}

func TestAttemptTimeoutError(t *testing.T) {
	t.Parallel()
	err := error(&attemptTimeoutError{err: context.DeadlineExceeded})
	if !errors.Is(err, ErrAttemptTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("attempt timeout must match ErrAttemptTimeout and context.DeadlineExceeded")
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("attempt timeout must be a net.Error with Timeout() true")
	}
}

// fakeH2Reset converts itself into any h2StreamError, as net/http's
// unexported HTTP/2 stream error does through its As method.
type fakeH2Reset struct{ code uint32 }

func (f fakeH2Reset) Error() string { return "stream error" }
func (f fakeH2Reset) As(target any) bool {
	p, ok := target.(*h2StreamError)
	if ok {
		*p = h2StreamError{StreamID: 1, Code: f.code}
	}
	return ok
}

func TestHTTP2StreamResets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                 string
		code                 uint32
		transient, neverSent bool
	}{
		{"INTERNAL_ERROR", 0x2, true, false},
		{"REFUSED_STREAM", 0x7, true, true},
		{"PROTOCOL_ERROR", 0x1, false, false},
		{"CANCEL", 0x8, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := fmt.Errorf("round trip: %w", fakeH2Reset{code: tt.code})
			if got := IsTransient(nil, err); got != tt.transient {
				t.Errorf("IsTransient = %v; want %v", got, tt.transient)
			}
			// net/http returns the stream error itself.
			req := httptest.NewRequest("POST", "https://api.test/", nil)
			if got := neverSent(req, fakeH2Reset{code: tt.code}); got != tt.neverSent {
				t.Errorf("neverSent = %v; want %v", got, tt.neverSent)
			}
		})
	}
}

// TestInProgressConflictIsOnlyAKeyedRetryLater409: only an idempotency
// layer's 409 for a keyed request, asking to be retried later and not a
// replay, says that an attempt with the same key is still running; any
// other status with the same headers, a 409 without them, and no answer
// at all say nothing of the kind.
func TestInProgressConflictIsOnlyAKeyedRetryLater409(t *testing.T) {
	keyed := &http.Request{Header: http.Header{IdempotencyKeyHeader: {"k1"}}}
	unkeyed := &http.Request{Header: http.Header{}}
	answer := func(req *http.Request, status int, h http.Header) *http.Response {
		return &http.Response{StatusCode: status, Header: h, Request: req}
	}
	for _, c := range []struct {
		name string
		resp *http.Response
		want bool
	}{
		{"no answer", nil, false},
		{"keyed 409 Retry-After", answer(keyed, 409, http.Header{"Retry-After": {"1"}}), true},
		{"keyed 409 Retry-After 0", answer(keyed, 409, http.Header{"Retry-After": {"0"}}), true},
		{"keyed 503 Retry-After", answer(keyed, 503, http.Header{"Retry-After": {"1"}}), false},
		{"keyed 200 Retry-After", answer(keyed, 200, http.Header{"Retry-After": {"1"}}), false},
		{"keyed 409 without Retry-After", answer(keyed, 409, http.Header{}), false},
		{"unkeyed 409 Retry-After", answer(unkeyed, 409, http.Header{"Retry-After": {"1"}}), false},
		{"keyed 409 replayed", answer(keyed, 409, http.Header{"Retry-After": {"1"}, "Idempotent-Replayed": {"true"}}), false},
	} {
		if got := inProgressConflict(c.resp); got != c.want {
			t.Errorf("%s: inProgressConflict = %v; want %v", c.name, got, c.want)
		}
	}
}
