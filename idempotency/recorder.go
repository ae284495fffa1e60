package idempotency

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"

	"github.com/httpretry/httpretry/internal/serverdelay"
)

// RecordedHeader is the response field by which a [Handler] says that a
// response was not recorded: "Idempotent-Recorded: false". A retry with the
// same key then runs the handler again instead of replaying. A recorded
// response carries no such field.
//
// It is a header whenever the decision is made before the response's
// headers go out, which is always the case unless the handler flushes
// before it finishes; a response flushed early declares it as a trailer
// ("Trailer: Idempotent-Recorded") and sends it there if needed.
const RecordedHeader = "Idempotent-Recorded"

// recorder copies a response for the Store while passing it to the
// client.
//
// It holds the response back — status, headers and up to limit bytes of
// body — until one of three things happens: the handler returns (the
// Handler records the response, then sends it with a header saying
// whether that worked), the body outgrows limit (it is marked not
// recorded, and the held bytes and the rest are streamed through), or the
// handler flushes (the response goes out at once, with the marker
// declared as a trailer, and copying continues). Memory per request is at
// most limit bytes, which is what recording needs anyway. Responses that
// will not be recorded (a released status, a declared Content-Length over
// limit) go straight through.
type recorder struct {
	w       http.ResponseWriter
	limit   int64
	release func(status int) bool
	// outer is a copy of the headers outer layers set before the Handler
	// ran: they belong to each request, so a field still holding its outer
	// value is not next's to record.
	outer http.Header

	status      int
	sentHeader  http.Header // the headers as they went out, if sent while recordable
	body        []byte      // the copy; while !sent, none of it was written
	wroteHeader bool        // the final status is set
	answered    bool        // the handler wrote a final status or body itself
	sent        bool        // the status went to w
	capture     bool        // still copying: recordable so far
	hijacked    bool

	// hold keeps the whole response back until finish, whatever happens:
	// a [TxHandler] sends nothing before its transaction commits. A
	// response that cannot be held (a body over limit, 101 Switching
	// Protocols) is then dropped and marked tooLarge, a flush does
	// nothing and a hijack is refused.
	hold     bool
	tooLarge bool
}

func (rec *recorder) Header() http.Header { return rec.w.Header() }

// WriteHeader holds the final status back, or sends it at once when the
// response will not be recorded. An invalid status panics at the call, as
// net/http's own WriteHeader does, instead of once the response is sent:
// the Handler then frees the key like after any panic, and nothing
// invalid is recorded.
func (rec *recorder) WriteHeader(code int) {
	if code >= 200 {
		rec.answered = true
	}
	rec.writeHeader(code)
}

// writeHeader sets the status, whether the handler wrote it or net/http's
// implicit 200 applies.
func (rec *recorder) writeHeader(code int) {
	switch {
	case code < 100 || code > 999:
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	case rec.hijacked || rec.sent:
		rec.w.WriteHeader(code) // net/http reports the misuse
		return
	case rec.wroteHeader:
		return // a superfluous call while held: the first status stands
	case code >= 100 && code < 200 && code != http.StatusSwitchingProtocols:
		rec.w.WriteHeader(code) // informational (103): goes out at once
		return
	}
	rec.wroteHeader = true
	rec.status = code
	h := rec.w.Header()
	if rec.hold {
		rec.capture = true
		if code == http.StatusSwitchingProtocols || declaredLength(h) > rec.limit {
			rec.drop()
		}
		return
	}
	if code == http.StatusSwitchingProtocols || rec.release(code) || declaredLength(h) > rec.limit {
		h.Set(RecordedHeader, "false")
		rec.send()
		return
	}
	rec.capture = true
}

func (rec *recorder) Write(p []byte) (int, error) {
	if rec.hijacked {
		return rec.w.Write(p)
	}
	rec.answered = true
	if !rec.wroteHeader {
		rec.writeHeader(http.StatusOK)
	}
	if rec.tooLarge {
		return 0, errResponseNotHeld
	}
	if !rec.capture {
		return rec.w.Write(p)
	}
	if !bodyAllowed(rec.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if n := declaredLength(rec.w.Header()); n >= 0 && int64(len(rec.body))+int64(len(p)) > n {
		// As net/http's writer does: the bytes past the declared length
		// never go out, so they are not recorded either.
		return 0, http.ErrContentLength
	}
	if int64(len(rec.body))+int64(len(p)) > rec.limit && rec.hold {
		rec.drop()
		return 0, errResponseNotHeld
	}
	if int64(len(rec.body))+int64(len(p)) > rec.limit {
		rec.overflow()
		return rec.w.Write(p)
	}
	rec.body = append(rec.body, p...)
	if rec.sent {
		return rec.w.Write(p)
	}
	return len(p), nil
}

// overflow gives up recording a body that outgrew the limit, and sends
// what was held.
func (rec *recorder) overflow() {
	rec.capture = false
	if rec.sent {
		rec.w.Header().Set(http.TrailerPrefix+RecordedHeader, "false")
	} else {
		rec.w.Header().Set(RecordedHeader, "false")
		rec.send()
	}
	rec.body = nil
}

// errResponseNotHeld is what a held response's Write returns once the
// response cannot be held: its body outgrew the limit.
var errResponseNotHeld = errors.New("idempotency: response too large to hold until the transaction commits")

// drop gives up a held response that cannot be held: nothing of it is
// sent or recorded.
func (rec *recorder) drop() {
	rec.tooLarge = true
	rec.capture = false
	rec.body = nil
}

// send writes the held status and body to the client. A response still
// recordable keeps a copy of the headers that went out: later changes
// do not reach the client, so they must not reach the record either.
func (rec *recorder) send() {
	rec.sent = true
	if rec.capture {
		sniffContentType(rec.w.Header(), rec.status, rec.body)
		rec.sentHeader = rec.w.Header().Clone()
	}
	rec.w.WriteHeader(rec.status)
	if len(rec.body) > 0 {
		// A write error means the client is gone; the copy stands.
		_, _ = rec.w.Write(rec.body)
	}
}

// sniffContentType sets the Content-Type net/http would sniff from the
// first bytes written, body, when the handler set none: the header then
// holds what goes out, and is recorded. A response sent with no body yet
// gets none, as from net/http; its replays must not get one either (see
// the Handler's replay).
func sniffContentType(h http.Header, status int, body []byte) {
	if _, ok := h["Content-Type"]; ok || len(body) == 0 || !bodyAllowed(status) || h.Get("Transfer-Encoding") != "" {
		return
	}
	h.Set("Content-Type", http.DetectContentType(body))
}

// FlushError sends the response so far and flushes it, as
// [http.ResponseController] expects. Whether it will be recorded is not
// known yet, so the marker is declared as a trailer.
func (rec *recorder) FlushError() error {
	if rec.hold {
		return nil // nothing goes out before the transaction commits
	}
	if !rec.hijacked {
		if !rec.wroteHeader {
			rec.writeHeader(http.StatusOK) // not an answer by itself
		}
		if !rec.sent {
			h := rec.w.Header()
			if len(declaredTrailers(h)) > 0 {
				// As declareTrailers does for a held response: a declared
				// length would keep net/http from sending the handler's
				// trailers over HTTP/1.1, which its replays carry.
				h.Del("Content-Length")
			}
			h.Add("Trailer", RecordedHeader)
			rec.send()
		}
	}
	return http.NewResponseController(rec.w).Flush()
}

// Flush implements [http.Flusher].
func (rec *recorder) Flush() { _ = rec.FlushError() }

// Hijack implements [http.Hijacker]; a hijacked response is never
// recorded.
func (rec *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if rec.hold {
		return nil, nil, http.ErrNotSupported
	}
	conn, brw, err := http.NewResponseController(rec.w).Hijack()
	if err == nil {
		rec.hijacked = true
		rec.capture = false
		rec.body = nil
	}
	return conn, brw, err
}

// Push implements [http.Pusher] when the client's writer does (HTTP/2);
// otherwise it returns [http.ErrNotSupported], as a Pusher whose client
// disabled push does.
func (rec *recorder) Push(target string, opts *http.PushOptions) error {
	if p, ok := rec.w.(http.Pusher); ok {
		return p.Push(target, opts)
	}
	return http.ErrNotSupported
}

// Unwrap lets [http.ResponseController] reach the client's writer for
// deadlines and full duplex.
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.w }

// discardHeader gives up the headers of a held response that will not
// be sent (a [TxHandler]'s, rolled back): the client's header map holds
// again what outer layers set before next ran, so that an answer written
// in its place carries none of next's fields (a Content-Length that
// would cut it, a Location naming what was undone).
func (rec *recorder) discardHeader() {
	h := rec.w.Header()
	clear(h)
	for k, vs := range rec.outer {
		h[k] = vs
	}
}

// implicitStatus gives a handler that returned without writing the status
// net/http sends for it, 200, as if it had written it.
func (rec *recorder) implicitStatus() {
	if !rec.wroteHeader && !rec.hijacked {
		rec.WriteHeader(http.StatusOK)
	}
}

// result returns the response to record once the handler has returned, or
// nil if it must not be recorded. A handler that wrote neither a status
// nor a body — at most it flushed — before its request's context ended
// (abandoned) answered nothing: it saw its client go and returned, and
// what net/http sends by default is no outcome of the operation.
func (rec *recorder) result(abandoned bool) *Response {
	if rec.hijacked || !rec.wroteHeader || !rec.capture || (abandoned && !rec.answered) {
		return nil
	}
	final := rec.w.Header()
	sent := final
	if rec.sent {
		sent = rec.sentHeader
	} else {
		sniffContentType(final, rec.status, rec.body) // as send will
	}
	if asksToRetry(rec.status, sent) || (rec.hold && rec.release(rec.status)) {
		return nil
	}
	return &Response{Status: rec.status, Header: recordedHeader(sent, final, rec.outer), Body: rec.body}
}

// asksToRetry reports whether a response is a conflict that asks the
// client to try again later: a 409 with Retry-After (or one of its
// millisecond forms, Retry-After-Ms or X-Amz-Retry-After), such as an
// idempotency layer's "a request with this key is in progress" from a
// Handler nested inside, or an upstream service. It is no outcome of the
// operation, and httpretry's Transport retries it (the same headers
// count for both); recorded, its replay would be final.
func asksToRetry(status int, h http.Header) bool {
	return status == http.StatusConflict && serverdelay.Present(h)
}

// finish sends what is still held, marked as not recorded unless
// recorded, once the Handler has tried to record it.
func (rec *recorder) finish(recorded bool) {
	if rec.hijacked || (rec.wroteHeader && !rec.capture) {
		return
	}
	h := rec.w.Header()
	switch {
	case recorded:
	case rec.sent:
		h.Set(http.TrailerPrefix+RecordedHeader, "false")
	default:
		h.Set(RecordedHeader, "false")
	}
	if rec.wroteHeader && !rec.sent {
		// Send trailers as a replay will: declared, and only as trailers.
		declareTrailers(h)
		rec.send()
	}
}

// declaredLength returns the Content-Length the handler set, or -1.
func declaredLength(h http.Header) int64 {
	n, err := strconv.ParseInt(h.Get("Content-Length"), 10, 64)
	if err != nil {
		return -1
	}
	return n
}
