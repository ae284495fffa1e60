package httpretry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	"github.com/httpretry/httpretry/internal/serverdelay"
)

// ErrAttemptTimeout matches (with [errors.Is]) the error of an attempt that
// ran out of time while the caller's context was still live: its
// AttemptTimeout, or the operation's Timeout, ended it. Such an attempt is
// transient; the caller's own context ending is not. A custom
// [Transport.Transient] function can test for it.
var ErrAttemptTimeout = errors.New("httpretry: attempt timed out")

// ErrIdleTimeout matches (with [errors.Is]) the error of an attempt, or of
// a Read of a returned body, that received no byte of the response for
// [Transport.IdleTimeout]. The error's Timeout method reports true.
var ErrIdleTimeout = errors.New("httpretry: response idle timeout")

// attemptTimeoutError marks an attempt error caused by a context the
// Transport derived, not by the caller's. It keeps the original error in
// its chain, so errors.Is(err, context.DeadlineExceeded) still holds.
type attemptTimeoutError struct{ err error }

func (e *attemptTimeoutError) Error() string        { return "httpretry: attempt timed out: " + e.err.Error() }
func (e *attemptTimeoutError) Unwrap() error        { return e.err }
func (e *attemptTimeoutError) Timeout() bool        { return true }
func (e *attemptTimeoutError) Is(target error) bool { return target == ErrAttemptTimeout }

// errHedgeLost is what a hedgeLostError matches, for ErrorClass.
var errHedgeLost = errors.New("httpretry: attempt lost to another")

// hedgeLostError is the error of a hedged attempt canceled because
// another attempt's answer ended the operation: neither a timeout nor the
// caller's doing. It keeps the cancellation in its chain, so
// errors.Is(err, context.Canceled) still holds.
type hedgeLostError struct{ err error }

func (e *hedgeLostError) Error() string {
	return "httpretry: canceled, another attempt won: " + e.err.Error()
}
func (e *hedgeLostError) Unwrap() error        { return e.err }
func (e *hedgeLostError) Is(target error) bool { return target == errHedgeLost }

// asLost returns the error of an attempt the operation canceled as a
// loser: a cancellation the Transport's own context carried (which
// complete marked as an attempt timeout, since the caller's context was
// live) is the attempt losing, not running out of time. Any other error,
// an attempt limit's deadline included, is returned as it is.
func asLost(err error) error {
	var te *attemptTimeoutError
	if errors.As(err, &te) && errors.Is(te.err, context.Canceled) {
		return &hedgeLostError{err: te.err}
	}
	return err
}

// statusOverloaded is the status some APIs (Anthropic's among them) answer
// when they are temporarily overloaded. It is not registered with IANA;
// IsTransient treats it as 503 Service Unavailable.
const statusOverloaded = 529

// IsTransient reports whether an attempt's outcome is a failure that another
// attempt could reasonably resolve. It is the default [Transport.Transient].
//
// Transient: 408, 429, 500, 502, 503, 504 and 529 (an overloaded API's
// status); a 409 "still in progress" for a request with an idempotency key
// (with Retry-After, not a replay); connection refused, reset or aborted,
// broken pipe, an unexpected EOF or closed connection, an HTTP/2 stream
// reset with INTERNAL_ERROR or REFUSED_STREAM, network and temporary DNS
// timeouts, [ErrAttemptTimeout] and [ErrIdleTimeout]. Everything else is
// final, the caller's context ending and errors it does not recognise
// included. On a 4xx or 5xx, "X-Should-Retry" (or "Stripe-Should-Retry")
// "false" makes it final and "true" transient; a success is never retried.
// docs/rules.md lists every case.
func IsTransient(resp *http.Response, err error) bool {
	if err != nil {
		return transientError(err)
	}
	if resp == nil {
		return false
	}
	// A server's word applies to error responses, as the SDKs of the
	// APIs that send it read it; a success is never sent again.
	if resp.StatusCode >= 400 {
		if retry, ok := serverSaysRetry(resp.Header); ok {
			return retry
		}
	}
	switch resp.StatusCode {
	case http.StatusRequestTimeout,
		http.StatusTooManyRequests,
		http.StatusInternalServerError,
		http.StatusBadGateway,
		http.StatusServiceUnavailable,
		http.StatusGatewayTimeout,
		statusOverloaded:
		return true
	case http.StatusConflict:
		return keyInProgress(resp)
	}
	return false
}

// inProgressConflict reports whether resp, possibly nil, is an
// idempotency layer's 409 saying that another request with the same key
// is still being processed (see keyInProgress): an answer that ends
// nothing while the attempts it names run.
func inProgressConflict(resp *http.Response) bool {
	return resp != nil && resp.StatusCode == http.StatusConflict && keyInProgress(resp)
}

// keyInProgress reports whether a 409 is an idempotency layer's "the first
// request with this key is still running": only that conflict ends by
// itself. The request carried a key; the response asks to be retried
// later (Retry-After, or one of its millisecond forms: Retry-After-Ms,
// X-Amz-Retry-After), as such a layer does and a handler's own conflict
// does not; and it is not a recorded response replayed, since a replay is
// the final answer to the key.
func keyInProgress(resp *http.Response) bool {
	if resp.Request == nil || !hasIdempotencyKey(resp.Request.Header) {
		return false
	}
	if !serverdelay.Present(resp.Header) {
		return false
	}
	replayed := resp.Header["Idempotent-Replayed"]
	return len(replayed) == 0 || !strings.EqualFold(strings.TrimSpace(replayed[0]), "true")
}

func transientError(err error) bool {
	if errors.Is(err, ErrAttemptTimeout) || errors.Is(err, ErrIdleTimeout) {
		return true
	}
	// The caller's context ending is never transient, whatever the
	// transport made of it.
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if neverSentPermanently(err) {
		return false
	}
	if connectionLost(err) {
		return true
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return dnsErr.IsTimeout || dnsErr.IsTemporary
	}
	if code, ok := h2ResetCode(err); ok {
		return code == h2InternalError || code == h2RefusedStream
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return true
	}
	return serverClosed(err.Error())
}

// serverClosed reports, from an error's text, a server that closed the
// connection under the request: an idle keep-alive connection closed as
// it was reused, a connection lost before the response, or an HTTP/2
// server that sent GOAWAY and closed the connection with the stream in
// flight (a server shutting down or restarting; the same as HTTP/1.1's
// EOF). net/http reports these only as unexported errors (the GOAWAY one
// is its bundled http2GoAwayError, golang.org/x/net/http2's GoAwayError
// says the same): their text is the only way to recognise them.
func serverClosed(msg string) bool {
	for _, text := range serverClosedTexts {
		if strings.Contains(msg, text) {
			return true
		}
	}
	return false
}

// serverClosedTexts are the texts of net/http's errors for a server that
// closed the connection under the request (see serverClosed).
var serverClosedTexts = [...]string{
	"server closed idle connection",
	"transport connection broken",
	"server sent GOAWAY and closed the connection",
}

// connectionLost reports a connection refused, reset, aborted or closed
// under the request or its response. The system's own codes for these,
// where they differ from the POSIX ones (Winsock's), are in osConnErrors.
func connectionLost(err error) bool {
	for _, target := range lostConnectionErrors {
		if errors.Is(err, target) {
			return true
		}
	}
	return osConnErrorClass(err) != ""
}

// lostConnectionErrors are the errors, found with errors.Is, of a
// connection refused, reset, aborted or closed under the request or its
// response.
var lostConnectionErrors = [...]error{
	syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED,
	syscall.EPIPE, io.ErrUnexpectedEOF, io.EOF,
}

// errorClassOf pairs an error, found with errors.Is, with its ErrorClass
// word.
type errorClassOf struct {
	target error
	class  string
}

// osConnErrorClass returns the ErrorClass word of a connection error in
// the system's own codes (osConnErrors), or "".
func osConnErrorClass(err error) string {
	for _, c := range osConnErrors {
		if errors.Is(err, c.target) {
			return c.class
		}
	}
	return ""
}

// neverSentPermanently reports errors that show the request could not be
// sent and never will be as it stands: certificate problems, names that
// do not resolve, malformed URLs.
func neverSentPermanently(err error) bool {
	var (
		dnsErr *net.DNSError
		urlErr *url.Error
	)
	if isCertError(err) {
		return true
	}
	if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
		return true
	}
	if errors.As(err, &urlErr) && urlErr.Op == "parse" {
		return true
	}
	return malformedRequest(err)
}

// malformedRequest reports net/http's errors for a request that cannot be
// sent as it stands. net/http returns them as unexported string errors:
// their text is the only way to recognise them.
func malformedRequest(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "unsupported protocol scheme") ||
		strings.Contains(msg, "no Host in request URL") ||
		strings.Contains(msg, "nil Request.URL")
}

// neverSent reports whether err proves that req never left the client, so
// repeating it cannot repeat a side effect: the connection was never
// established (a dial error, which includes refused connections and DNS
// failures), the server refused the HTTP/2 stream unprocessed, or the
// request could not be formed at all.
//
// Only the attempt's outermost error counts, once a *url.Error naming req
// itself (as http.Client adds) is taken off. An error deeper in the chain
// may belong to another request: a Base built on http.Client follows a
// POST's 303 with a GET, and a dial error of that GET proves nothing about
// the POST, which was applied.
func neverSent(req *http.Request, err error) bool {
	if uerr, ok := err.(*url.Error); ok && namesRequest(uerr, req) {
		err = uerr.Err
	}
	switch e := err.(type) {
	case *net.OpError:
		return e.Op == "dial"
	case *url.Error:
		return e.Op == "parse"
	case *tls.CertificateVerificationError, x509.UnknownAuthorityError,
		x509.HostnameError, x509.CertificateInvalidError:
		return true
	}
	// RFC 9113 §8.7: a stream refused with REFUSED_STREAM was not
	// processed, so even a POST can be sent again.
	var se h2StreamError
	if a, ok := err.(interface{ As(any) bool }); ok && a.As(&se) && se.Code == h2RefusedStream {
		return true
	}
	// net/http returns malformed requests as unexported string errors; a
	// wrapper's text would include them, so only a leaf counts.
	return errors.Unwrap(err) == nil && malformedRequest(err)
}

// namesRequest reports whether a *url.Error is about req itself: same
// method and same URL, as http.Client builds it.
func namesRequest(uerr *url.Error, req *http.Request) bool {
	if req.URL == nil || uerr.URL != req.URL.String() {
		return false
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	return strings.EqualFold(uerr.Op, method)
}

// ErrorClass names an error's category with a word from a small fixed
// set, safe as a log field or a metric label: it carries no URL, header
// or body, as an error's own text may (a *url.Error quotes the URL, query
// string included). The words are "hedge_lost" (a hedged attempt
// canceled because another attempt won), "attempt_timeout",
// "idle_timeout", "canceled", "deadline_exceeded", "connection_refused",
// "connection_reset", "broken_pipe", "eof", "dns", "tls",
// "invalid_request", "timeout" and "other"; a nil error gives "".
func ErrorClass(err error) string {
	if err == nil {
		return ""
	}
	for _, c := range errorClasses {
		if errors.Is(err, c.target) {
			return c.class
		}
	}
	if class := osConnErrorClass(err); class != "" {
		return class
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return "dns"
	}
	if isCertError(err) {
		return "tls"
	}
	if neverSentPermanently(err) {
		return "invalid_request"
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return "timeout"
	}
	return "other"
}

// errorClasses are ErrorClass's words for errors found with errors.Is,
// in the order they are tried.
var errorClasses = [...]errorClassOf{
	{errHedgeLost, "hedge_lost"},
	{ErrAttemptTimeout, "attempt_timeout"},
	{ErrIdleTimeout, "idle_timeout"},
	{context.Canceled, "canceled"},
	{context.DeadlineExceeded, "deadline_exceeded"},
	{syscall.ECONNREFUSED, "connection_refused"},
	{syscall.ECONNRESET, "connection_reset"},
	{syscall.EPIPE, "broken_pipe"},
	{io.ErrUnexpectedEOF, "eof"},
	{io.EOF, "eof"},
}

// isCertError reports a TLS certificate that failed verification: no
// attempt will make it valid.
func isCertError(err error) bool {
	var (
		certErr    *tls.CertificateVerificationError
		unknownCA  x509.UnknownAuthorityError
		hostErr    x509.HostnameError
		invalidErr x509.CertificateInvalidError
	)
	return errors.As(err, &certErr) || errors.As(err, &unknownCA) ||
		errors.As(err, &hostErr) || errors.As(err, &invalidErr)
}

// serverVouches reports whether an error response carries the server's
// explicit statement that another attempt is safe ("X-Should-Retry: true"
// or "Stripe-Should-Retry: true"). RFC 9110 §9.2.2 allows repeating a
// non-idempotent request when the client has some means to know the
// original was never applied; the server saying so is that means.
func serverVouches(resp *http.Response) bool {
	if resp == nil || resp.StatusCode < 400 {
		return false
	}
	retry, ok := serverSaysRetry(resp.Header)
	return ok && retry
}

// Headers by which a server says whether another attempt could help.
const (
	shouldRetryHeader       = "X-Should-Retry"
	stripeShouldRetryHeader = "Stripe-Should-Retry"
)

// serverSaysRetry reads the server's should-retry headers; ok is false
// when neither holds "true" or "false" (case-insensitive).
func serverSaysRetry(h http.Header) (retry, ok bool) {
	if len(h) == 0 {
		return false, false
	}
	for _, name := range [...]string{shouldRetryHeader, stripeShouldRetryHeader} {
		// The names are canonical and net/http canonicalizes what it
		// reads: index the map, skipping Get's canonicalization.
		vs := h[name]
		if len(vs) == 0 {
			continue
		}
		switch v := strings.TrimSpace(vs[0]); {
		case strings.EqualFold(v, "true"):
			return true, true
		case strings.EqualFold(v, "false"):
			return false, true
		}
	}
	return false, false
}

// HTTP/2 error codes (RFC 9113 §7) that make a stream reset transient.
const (
	h2InternalError = 0x2 // the server failed the stream: like a reset connection
	h2RefusedStream = 0x7 // the server refused the stream before processing it
)

// h2StreamError has the fields of net/http's HTTP/2 stream error (and of
// golang.org/x/net/http2.StreamError). That type is unexported, but its
// As method copies itself into any struct with the same fields: the only
// way to read its code without importing x/net.
type h2StreamError struct {
	StreamID uint32
	Code     uint32
	Cause    error
}

func (e h2StreamError) Error() string { return "http2 stream error" }

// h2ResetCode returns the error code of an HTTP/2 stream reset in err's
// chain.
func h2ResetCode(err error) (uint32, bool) {
	var se h2StreamError
	if errors.As(err, &se) {
		return se.Code, true
	}
	return 0, false
}
