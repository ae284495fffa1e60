package idempotency

import "net/http"

// Kind names what a [Handler] did with a request. Its values are a small
// fixed set of snake_case words, safe to use as a metric label; [Kinds]
// lists them.
type Kind string

// The kinds of [Event].
const (
	// KindExecuted: the request reserved its key and the wrapped handler
	// ran. Event.Status is the status it answered, 0 if it panicked or
	// wrote nothing.
	KindExecuted Kind = "executed"
	// KindReplayed: the key's recorded response was replayed, without
	// running the handler.
	KindReplayed Kind = "replayed"
	// KindConflict: the key's first request is still in progress; the
	// request was answered 409 with Retry-After.
	KindConflict Kind = "conflict"
	// KindMismatch: the key was used with a different request (method,
	// target or body); the request was answered 422.
	KindMismatch Kind = "mismatch"
	// KindMissingKey: the operation requires a key and the request had
	// none; it was answered 400.
	KindMissingKey Kind = "missing_key"
	// KindInvalidKey: the key was empty, too long, repeated or malformed;
	// the request was answered 400.
	KindInvalidKey Kind = "invalid_key"
	// KindRequestTooLarge: the request body was larger than
	// Options.MaxRequestBody, or than an outer [http.MaxBytesReader]
	// allows; the request was answered 413.
	KindRequestTooLarge Kind = "request_too_large"
	// KindRequestUnreadable: the request body could not be read to its
	// end (the client stopped sending, or the connection broke); the
	// request was answered 400 and the connection closed.
	KindRequestUnreadable Kind = "request_unreadable"
	// KindTakeover: the request took over a key whose previous owner's
	// lock had expired (it crashed, hung or panicked without releasing).
	// A KindExecuted event follows.
	KindTakeover Kind = "takeover"
	// KindNotRecorded: the handler's response was not recorded and the
	// reservation was released, so a retry runs the handler again: a
	// status Options.Release selects, a 409 with Retry-After ("in
	// progress, ask again"), a body over Options.MaxResponseBody, a
	// handler that wrote no status and no body before its client had
	// gone, a hijacked connection, a panic (an invalid status included),
	// or a store that could not hold it ([ErrStoreFull]).
	KindNotRecorded Kind = "not_recorded"
	// KindFenced: the handler finished after its lock expired and another
	// request took the key over; its response was not recorded (the
	// successor's is).
	KindFenced Kind = "fenced"
	// KindStoreError: the Store failed, or had no room for a new key
	// ([ErrStoreFull] from Reserve). Before the handler ran, the request
	// was answered 503 with Retry-After; after, the response went out
	// unrecorded and the lock expires in its own time.
	KindStoreError Kind = "store_error"
)

// Kinds returns every Kind, for registering metrics ahead of time.
func Kinds() []Kind {
	return []Kind{
		KindExecuted, KindReplayed, KindConflict, KindMismatch,
		KindMissingKey, KindInvalidKey, KindRequestTooLarge, KindRequestUnreadable, KindTakeover,
		KindNotRecorded, KindFenced, KindStoreError,
	}
}

// Event reports one thing a [Handler] did, to [Options.OnEvent]. It never
// carries the key, headers or bodies.
type Event struct {
	// Kind says what happened.
	Kind Kind
	// Method is the request's method.
	Method string
	// Route is the request's route, from Options.Route: a bounded name
	// such as a ServeMux pattern, never the raw path.
	Route string
	// Status is the status answered, or, for KindExecuted and
	// KindNotRecorded, the status the handler answered (0 when it
	// panicked or hijacked the connection).
	Status int
}

// event reports an event to OnEvent, if set.
func (h *handler) event(r *http.Request, kind Kind, status int) {
	if h.onEvent == nil {
		return
	}
	h.onEvent(Event{Kind: kind, Method: r.Method, Route: h.route(r), Status: status})
}

func (h *handler) route(r *http.Request) string {
	if h.routeOf != nil {
		return h.routeOf(r)
	}
	return r.Pattern
}
