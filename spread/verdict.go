package spread

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"

	"github.com/httpretry/httpretry/internal/overload"
)

// verdict is what one attempt's result says of the address it went to.
type verdict int

const (
	neutral verdict = iota // nothing: the caller ended it, or it never asked for a connection
	success                // the address answered: it is restored
	failure                // counts towards its ejection
)

// judgeAnswer judges an attempt by what RoundTrip returned: an error
// fails the address, unless the request's context was canceled (a hedge
// that lost, a caller that gave up) or the request never asked for a
// connection (net/http refused it first: an invalid header, say, which
// is the caller's doing, not the address's); a 5xx that signals overload
// (a 503, a 529, a 5xx with "X-Should-Retry: false") fails it; any other
// response is a success, settled when its body ends (judgeBody). A 429 is
// the caller's quota, not the address's health.
func judgeAnswer(resp *http.Response, err error, askedConn bool) verdict {
	if err != nil {
		if !askedConn || errors.Is(err, context.Canceled) {
			return neutral
		}
		return failure
	}
	if resp.StatusCode >= 500 && overload.Response(resp) {
		return failure
	}
	return success
}

// judgeBody judges a response whose headers were a success by how its
// body ended: read to its end or closed by the caller (err nil), a
// success; cut by the request's context, nothing, since a caller that
// reads slowly under a deadline looks just like a server that stalls;
// any other error (a reset, a connection closed mid-body), a failure.
func judgeBody(err error) verdict {
	switch {
	case err == nil || err == io.EOF:
		return success
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return neutral
	}
	return failure
}

// connTrace records whether a request asked net/http for a connection.
type connTrace struct {
	asked atomic.Bool
	trace httptrace.ClientTrace
}

// withConnTrace returns req with a trace that records in c whether it
// asked for a connection; a trace the caller installed still runs.
func withConnTrace(req *http.Request) (*http.Request, *connTrace) {
	c := new(connTrace)
	c.trace.GetConn = func(string) { c.asked.Store(true) }
	return req.WithContext(httptrace.WithClientTrace(req.Context(), &c.trace)), c
}
