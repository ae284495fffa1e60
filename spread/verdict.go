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

// ending is how an attempt's context had ended when its result came.
type ending int

const (
	running  ending = iota // it had not ended
	canceled               // canceled: by the caller, or because a hedge won, whatever the cause given
	expired                // its deadline passed
	stallCut               // canceled with a cause that is a timeout: httpretry's IdleTimeout cut a silent attempt
)

// endingOf reads how ctx has ended. A cause is read only to tell a stall
// that httpretry cut from a cancellation: a caller that cancels with a
// cause of its own (context.WithCancelCause, as errgroup does) makes
// net/http return that cause instead of context.Canceled.
func endingOf(ctx context.Context) ending {
	switch err := ctx.Err(); {
	case err == nil:
		return running
	case errors.Is(err, context.DeadlineExceeded):
		return expired
	}
	var te interface{ Timeout() bool }
	if errors.As(context.Cause(ctx), &te) && te.Timeout() {
		return stallCut
	}
	return canceled
}

// judgeAnswer judges an attempt by what RoundTrip returned and how its
// context had ended (end): an error fails the address, unless the
// request was canceled (a hedge that lost, a caller that gave up, with
// or without a cause) or never asked for a connection (net/http refused
// it first: an invalid header, say, which is the caller's doing, not the
// address's); a deadline before the headers, or a stall cut by
// IdleTimeout, fails it; a 5xx that signals overload (a 503, a 529, a
// proxy's 502 or 504, a 5xx with "X-Should-Retry: false":
// overload.Response) fails it; any other response is a
// success, settled when its body ends (judgeBody). A 429 is the caller's
// quota, not the address's health.
func judgeAnswer(resp *http.Response, err error, askedConn bool, end ending) verdict {
	if err != nil {
		switch {
		case !askedConn, end == canceled:
			return neutral
		case end == running && errors.Is(err, context.Canceled):
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
// body ended (err) and how the request's context had ended then (end):
// read to its end or closed by the caller (err nil), a success; cut by
// IdleTimeout (the server went silent while it was read), a failure; cut
// by the request's deadline or a cancellation, nothing, since a caller
// that reads slowly under a deadline looks just like a server that
// stalls; any other error (a reset, a connection closed mid-body), a
// failure.
func judgeBody(err error, end ending) verdict {
	switch {
	case err == nil || err == io.EOF:
		return success
	case end == stallCut:
		return failure
	case end == canceled, end == expired:
		return neutral
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
