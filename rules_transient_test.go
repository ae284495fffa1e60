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
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// These tests hold docs/rules.md's paragraph "What counts as transient"
// to the classifier, IsTransient, both ways: every status and kind of
// error the paragraph names is classified as it says, and everything the
// classifier retries (its statuses, its lists of connection errors and
// texts) is named there. Changing one without the other fails here.

// transientParagraph returns docs/rules.md's paragraph on what counts as
// transient, whitespace collapsed, in three parts: the statuses (up to
// "Also transient:"), the errors it calls transient (up to "Not
// transient:"), and the rest: the errors it does not, and the server's
// word.
func transientParagraph(t *testing.T) (statuses, transient, rest string) {
	t.Helper()
	doc, err := os.ReadFile(rulesDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, para, ok := strings.Cut(string(doc), "What counts as transient (`IsTransient`):")
	if !ok {
		t.Fatal(rulesDoc + ": the paragraph \"What counts as transient (`IsTransient`):\" is missing")
	}
	para, _, _ = strings.Cut(para, "\n\n")
	para = strings.Join(strings.Fields(para), " ")
	statuses, after, ok1 := strings.Cut(para, "Also transient:")
	transient, rest, ok2 := strings.Cut(after, "Not transient:")
	if !ok1 || !ok2 {
		t.Fatalf("%s: the paragraph on what is transient no longer has \"Also transient:\" and \"Not transient:\": %s", rulesDoc, para)
	}
	return statuses, transient, rest
}

// TestRulesTransientStatuses: the statuses docs/rules.md calls transient
// are exactly those IsTransient retries without any header, and its 409
// is transient under exactly the conditions the paragraph states.
func TestRulesTransientStatuses(t *testing.T) {
	t.Parallel()
	text, _, _ := transientParagraph(t)
	var listed []int
	for _, m := range regexp.MustCompile(`\b[1-5]\d\d\b`).FindAllString(text, -1) {
		n, _ := strconv.Atoi(m)
		listed = append(listed, n)
	}
	get, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	for status := 100; status <= 599; status++ {
		if status == http.StatusConflict {
			continue
		}
		resp := &http.Response{StatusCode: status, Header: http.Header{}, Request: get}
		if got, want := IsTransient(resp, nil), slices.Contains(listed, status); got != want {
			t.Errorf("status %d: IsTransient = %v; %s's paragraph says %v (it lists %v)", status, got, rulesDoc, want, listed)
		}
	}

	// The 409: only an idempotency layer's "still running".
	if !slices.Contains(listed, http.StatusConflict) {
		t.Fatalf("%s's paragraph no longer names the 409 that is transient: %s", rulesDoc, text)
	}
	conds := []string{"carried a key", "`Retry-After`", "`Idempotent-Replayed: true`"}
	for _, name := range msDelayHeaders {
		conds = append(conds, "`"+name+"`")
	}
	for _, cond := range conds {
		if !strings.Contains(text, cond) {
			t.Errorf("%s's paragraph no longer states the 409's condition %q: %s", rulesDoc, cond, text)
		}
	}
	keyed := &http.Request{Method: http.MethodPost, Header: http.Header{IdempotencyKeyHeader: {"k1"}}}
	plain := &http.Request{Method: http.MethodPost, Header: http.Header{}}
	for _, c := range []struct {
		name   string
		req    *http.Request
		header http.Header
		want   bool
	}{
		{"keyed, Retry-After", keyed, http.Header{"Retry-After": {"1"}}, true},
		{"keyed, Retry-After-Ms", keyed, http.Header{"Retry-After-Ms": {"500"}}, true},
		{"keyed, X-Amz-Retry-After", keyed, http.Header{"X-Amz-Retry-After": {"500"}}, true},
		{"plain, X-Amz-Retry-After", plain, http.Header{"X-Amz-Retry-After": {"500"}}, false},
		{"keyed, neither", keyed, http.Header{}, false},
		{"keyed, Retry-After, Idempotent-Replayed: true", keyed, http.Header{"Retry-After": {"1"}, "Idempotent-Replayed": {"true"}}, false},
		{"no key, Retry-After", plain, http.Header{"Retry-After": {"1"}}, false},
	} {
		resp := &http.Response{StatusCode: http.StatusConflict, Header: c.header, Request: c.req}
		if got := IsTransient(resp, nil); got != c.want {
			t.Errorf("409, %s: IsTransient = %v; %s's paragraph says %v", c.name, got, rulesDoc, c.want)
		}
	}
}

// transientErrorKind is a kind of error as docs/rules.md's paragraph
// names it, with errors of that kind.
type transientErrorKind struct {
	phrase    string // the paragraph's words for it
	transient bool   // named after "Also transient:", else after "Not transient:"
	errs      []error
	// winsock: errors of this kind are Windows's codes, which
	// IsTransient matches only on Windows (classify_windows.go); here
	// their table is checked instead.
	winsock bool
}

// transientErrorKinds are the kinds of error the paragraph names.
var transientErrorKinds = []transientErrorKind{
	{"a connection refused", true, []error{errRefused}, false},
	{"reset", true, []error{errReset}, false},
	{"aborted", true, []error{&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNABORTED)}}, false},
	{"Winsock codes", true, []error{
		winErrWSAECONNREFUSED, winErrConnectionRefused, winErrWSAECONNRESET, winErrWSAECONNABORTED,
		winErrWSAENETRESET, winErrNetnameDeleted, winErrConnectionAborted, winErrWSAESHUTDOWN,
	}, true},
	{"a broken pipe", true, []error{&net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.EPIPE)}}, false},
	{"an unexpected EOF", true, []error{fmt.Errorf("reading the body: %w", io.ErrUnexpectedEOF)}, false},
	{"a server closing the connection", true, []error{
		fmt.Errorf("net/http: %w", io.EOF),
		errors.New("net/http: HTTP/1.x transport connection broken: write: connection reset"),
		errors.New("http: server closed idle connection"),
	}, false},
	{"a GOAWAY and then the close", true, []error{
		errors.New(`http2: server sent GOAWAY and closed the connection; LastStreamID=1, ErrCode=NO_ERROR, debug=""`),
	}, false},
	{"`INTERNAL_ERROR`", true, []error{fakeH2Reset{code: h2InternalError}}, false},
	{"`REFUSED_STREAM`", true, []error{fakeH2Reset{code: h2RefusedStream}}, false},
	{"network timeouts", true, []error{timeoutErr{}, &net.OpError{Op: "dial", Err: timeoutErr{}}}, false},
	{"`WSAETIMEDOUT`", true, []error{winErrWSAETIMEDOUT}, true},
	{"a DNS lookup that timed out or failed temporarily", true, []error{
		&net.DNSError{Err: "i/o timeout", Name: "api.test", IsTimeout: true},
		&net.DNSError{Err: "server misbehaving", Name: "api.test", IsTemporary: true},
	}, false},
	{"(`ErrAttemptTimeout`)", true, []error{&attemptTimeoutError{err: context.DeadlineExceeded}}, false},
	{"(`ErrIdleTimeout`)", true, []error{fmt.Errorf("reading: %w", ErrIdleTimeout)}, false},

	{"the caller's context ending", false, []error{
		context.Canceled, context.DeadlineExceeded,
		&url.Error{Op: "Get", URL: "http://api.test/", Err: context.Canceled},
	}, false},
	{"TLS certificate errors", false, []error{
		&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}},
		x509.HostnameError{Host: "api.test"},
	}, false},
	{"malformed URLs", false, []error{
		&url.Error{Op: "parse", URL: "::", Err: errors.New("missing protocol scheme")},
		errors.New(`unsupported protocol scheme "ftp"`),
		errors.New("http: no Host in request URL"),
	}, false},
	{"unknown hosts", false, []error{
		&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "nope.invalid", IsNotFound: true}},
	}, false},
	{"any other HTTP/2 stream reset", false, []error{
		fakeH2Reset{0x0}, fakeH2Reset{0x1}, fakeH2Reset{0x3}, fakeH2Reset{0x4}, fakeH2Reset{0x5}, fakeH2Reset{0x6},
		fakeH2Reset{0x8}, fakeH2Reset{0x9}, fakeH2Reset{0xa}, fakeH2Reset{0xb}, fakeH2Reset{0xc}, fakeH2Reset{0xd},
	}, false},
	{"any error it does not recognise", false, []error{errors.New("something odd")}, false},
}

// winsockTransient reports whether err is one of Windows's connection
// errors, which IsTransient retries there.
func winsockTransient(err error) bool {
	for _, c := range winsockConnErrors {
		if errors.Is(err, c.target) {
			return true
		}
	}
	return false
}

// TestRulesTransientErrors: every kind of error docs/rules.md's paragraph
// names is where the paragraph puts it (transient or not), and IsTransient
// classifies errors of that kind so.
func TestRulesTransientErrors(t *testing.T) {
	t.Parallel()
	_, transient, rest := transientParagraph(t)
	for _, k := range transientErrorKinds {
		half, where := rest, "after \"Not transient:\""
		if k.transient {
			half, where = transient, "after \"Also transient:\""
		}
		if !strings.Contains(half, k.phrase) {
			t.Errorf("%s's paragraph no longer names %q %s", rulesDoc, k.phrase, where)
		}
		for _, err := range k.errs {
			got := IsTransient(nil, err)
			if k.winsock {
				got = winsockTransient(err)
			}
			if got != k.transient {
				t.Errorf("%s (%v): IsTransient = %v; %s's paragraph says %v", k.phrase, err, got, rulesDoc, k.transient)
			}
		}
	}
}

// TestRulesNameEveryTransientError: every error the classifier's own lists
// retry (connection errors, Windows's codes, net/http's texts for a closed
// connection) is of a kind the paragraph calls transient.
func TestRulesNameEveryTransientError(t *testing.T) {
	t.Parallel()
	named := func(match func(error) bool) bool {
		for _, k := range transientErrorKinds {
			if k.transient && slices.ContainsFunc(k.errs, match) {
				return true
			}
		}
		return false
	}
	for _, target := range lostConnectionErrors {
		if !IsTransient(nil, target) {
			t.Errorf("IsTransient(%v) = false; it is in lostConnectionErrors", target)
		}
		if !named(func(err error) bool { return errors.Is(err, target) }) {
			t.Errorf("the classifier retries %v (lostConnectionErrors), which %s's paragraph does not call transient: name it there and add its kind to transientErrorKinds", target, rulesDoc)
		}
	}
	for _, c := range winsockConnErrors {
		if !named(func(err error) bool { return errors.Is(err, c.target) }) {
			t.Errorf("the classifier retries Windows's %d (winsockConnErrors), which %s's paragraph does not call transient: name it there and add its kind to transientErrorKinds", c.target, rulesDoc)
		}
	}
	for _, text := range serverClosedTexts {
		if !named(func(err error) bool { return strings.Contains(err.Error(), text) }) {
			t.Errorf("the classifier retries errors saying %q (serverClosedTexts), which %s's paragraph does not call transient: name it there and add its kind to transientErrorKinds", text, rulesDoc)
		}
	}
}

// TestRulesTransientServerWord: the headers by which docs/rules.md says a
// server overrides the status are the ones IsTransient reads, and each
// does what the paragraph says: "false" makes an error response final,
// "true" makes it transient, and a success is never retried.
func TestRulesTransientServerWord(t *testing.T) {
	t.Parallel()
	_, _, rest := transientParagraph(t)
	var names []string
	for _, m := range regexp.MustCompile("`([A-Za-z-]+-Should-Retry): (?:true|false)`").FindAllStringSubmatch(rest, -1) {
		names = append(names, m[1])
	}
	if want := []string{shouldRetryHeader, stripeShouldRetryHeader}; !slices.Equal(names, want) {
		t.Errorf("%s's paragraph names the server's word as %v; IsTransient reads %v, in that order", rulesDoc, names, want)
	}
	get, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	for _, name := range names {
		for _, c := range []struct {
			status int
			word   string
			want   bool
		}{
			{http.StatusServiceUnavailable, "false", false},
			{http.StatusNotFound, "true", true},
			{http.StatusOK, "true", false},
		} {
			resp := &http.Response{StatusCode: c.status, Header: http.Header{name: {c.word}}, Request: get}
			if got := IsTransient(resp, nil); got != c.want {
				t.Errorf("%d with %s: %s: IsTransient = %v; %s's paragraph says %v", c.status, name, c.word, got, rulesDoc, c.want)
			}
		}
	}
}
