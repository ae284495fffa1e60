package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/httpretry/httpretry/idempotency"
	"github.com/jonboulle/clockwork"
)

func memory() *idempotency.MemoryStore {
	return idempotency.NewMemoryStore(idempotency.MemoryOptions{})
}

func TestReplayIsByteIdentical(t *testing.T) {
	body := []byte("{\"id\":\"o-1\"}\x00\xff\r\n")
	runs := 0
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		got, _ := io.ReadAll(r.Body)
		if string(got) != `{"item":"book"}` {
			t.Errorf("handler read body %q", got)
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Location", "/orders/o-1")
		h.Add("X-Multi", "a")
		h.Add("X-Multi", "b")
		h.Set("Set-Cookie", "session=secret")
		h.Set("Connection", "X-Hop")
		h.Set("X-Hop", "per-connection")
		w.WriteHeader(http.StatusCreated)
		w.Write(body[:5])
		w.Write(body[5:])
	})
	s := newServer(t, next, memory(), idempotency.Options{})

	first := s.post(t, "k1", `{"item":"book"}`)
	expectStatus(t, "first", first, http.StatusCreated)
	if first.header.Get(idempotency.ReplayedHeader) != "" {
		t.Fatalf("first response carries %s", idempotency.ReplayedHeader)
	}
	for i := range 3 {
		again := s.post(t, "k1", `{"item":"book"}`)
		expectStatus(t, "replay", again, http.StatusCreated)
		if !bytes.Equal([]byte(again.body), body) {
			t.Fatalf("replay %d body = %q, want %q", i, again.body, body)
		}
		if got := again.header.Get(idempotency.ReplayedHeader); got != "true" {
			t.Fatalf("replay %d: %s = %q, want true", i, idempotency.ReplayedHeader, got)
		}
		for _, k := range []string{"Content-Type", "Location", "Content-Length"} {
			if got, want := again.header.Get(k), first.header.Get(k); got != want {
				t.Fatalf("replay %d: %s = %q, want %q", i, k, got, want)
			}
		}
		if got := again.header.Values("X-Multi"); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("replay %d: X-Multi = %q, want [a b]", i, got)
		}
		for _, k := range []string{"Set-Cookie", "X-Hop"} {
			if got := again.header.Get(k); got != "" {
				t.Fatalf("replay %d: %s = %q, want none", i, k, got)
			}
		}
	}
	if runs != 1 {
		t.Fatalf("handler ran %d times, want 1", runs)
	}
	want := []idempotency.Kind{idempotency.KindExecuted, idempotency.KindReplayed, idempotency.KindReplayed, idempotency.KindReplayed}
	if got := s.events.kinds(); !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
}

func TestConflictWhileInProgress(t *testing.T) {
	entered := make(chan struct{})
	proceed := newGate()
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-proceed.wait()
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "done")
	})
	s := newServer(t, next, memory(), idempotency.Options{})
	proceed.openAtEnd(t)

	firstDone := make(chan reply, 1)
	go func() { firstDone <- s.post(t, "k", "x") }()
	<-entered
	for range 3 {
		r := s.post(t, "k", "x")
		expectStatus(t, "duplicate in progress", r, http.StatusConflict)
		if got := r.header.Get("Retry-After"); got != "1" {
			t.Fatalf("Retry-After = %q, want 1", got)
		}
		p := problemOf(t, r)
		if p["title"] != "A request is outstanding for this Idempotency-Key" {
			t.Fatalf("409 title = %q", p["title"])
		}
	}
	proceed.open()
	expectStatus(t, "first", <-firstDone, http.StatusCreated)
	r := s.post(t, "k", "x")
	expectStatus(t, "after completion", r, http.StatusCreated)
	if r.body != "done" || r.header.Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("after completion: body %q, replayed %q; want the replay of done", r.body, r.header.Get(idempotency.ReplayedHeader))
	}
	if got := s.events.count(idempotency.KindConflict); got != 3 {
		t.Fatalf("conflict events = %d, want 3", got)
	}
}

func TestMismatch(t *testing.T) {
	c := &counter{}
	s := newServer(t, c, memory(), idempotency.Options{Methods: []string{"POST", "PATCH"}})
	expectStatus(t, "first", s.send(t, "POST", "/orders?region=eu", "k", "body"), http.StatusCreated)
	cases := []struct{ name, method, path, body string }{
		{"other_body", "POST", "/orders?region=eu", "body2"},
		{"empty_body", "POST", "/orders?region=eu", ""},
		{"other_path", "POST", "/carts?region=eu", "body"},
		{"other_query", "POST", "/orders?region=us", "body"},
		{"other_method", "PATCH", "/orders?region=eu", "body"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := s.send(t, tc.method, tc.path, "k", tc.body)
			expectStatus(t, tc.name, r, http.StatusUnprocessableEntity)
			if p := problemOf(t, r); p["title"] != "Idempotency-Key is already used" || p["type"] != idempotency.DefaultProblemType {
				t.Fatalf("422 problem = %v", p)
			}
		})
	}
	if c.count() != 1 {
		t.Fatalf("handler ran %d times, want 1", c.count())
	}
	if got := s.events.count(idempotency.KindMismatch); got != len(cases) {
		t.Fatalf("mismatch events = %d, want %d", got, len(cases))
	}
}

func TestMismatchWhileInProgress(t *testing.T) {
	entered, proceed := make(chan struct{}), newGate()
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-proceed.wait()
	})
	s := newServer(t, next, memory(), idempotency.Options{})
	proceed.openAtEnd(t)
	done := make(chan reply, 1)
	go func() { done <- s.post(t, "k", "a") }()
	<-entered
	expectStatus(t, "other payload in progress", s.post(t, "k", "b"), http.StatusUnprocessableEntity)
	proceed.open()
	expectStatus(t, "first", <-done, http.StatusOK)
}

func TestMissingKey(t *testing.T) {
	for _, require := range []bool{false, true} {
		t.Run(map[bool]string{false: "optional", true: "required"}[require], func(t *testing.T) {
			c := &counter{}
			s := newServer(t, c, memory(), idempotency.Options{RequireKey: require})
			for range 2 {
				r := s.post(t, "", "x")
				if !require {
					expectStatus(t, "no key, optional", r, http.StatusCreated)
					continue
				}
				expectStatus(t, "no key, required", r, http.StatusBadRequest)
				if p := problemOf(t, r); p["title"] != "Idempotency-Key is missing" {
					t.Fatalf("400 problem = %v", p)
				}
			}
			want, wantEvents := 2, 0
			if require {
				want, wantEvents = 0, 2
			}
			if c.count() != want {
				t.Fatalf("handler ran %d times, want %d", c.count(), want)
			}
			if got := s.events.count(idempotency.KindMissingKey); got != wantEvents {
				t.Fatalf("missing_key events = %d, want %d", got, wantEvents)
			}
		})
	}
}

func TestInvalidKey(t *testing.T) {
	c := &counter{}
	s := newServer(t, c, memory(), idempotency.Options{MaxKeyLength: 8, RequireKey: true})
	cases := map[string][]string{
		"empty_quoted":     {`""`},
		"blank":            {" "},
		"too_long":         {"123456789"},
		"too_long_quoted":  {`"123456789"`},
		"two_fields":       {"a", "b"},
		"list":             {"a,b"},
		"unclosed_quote":   {`"abc`},
		"after_quote":      {`"abc"d`},
		"bad_escape":       {`"a\b"`},
		"space_unquoted":   {"a b"},
		"non_ascii":        {"clé"},
		"x_and_plain_both": nil, // set below
	}
	for name, vals := range cases {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, s.url+"/orders", strings.NewReader("x"))
			for _, v := range vals {
				req.Header.Add(idempotency.KeyHeader, v)
			}
			if vals == nil {
				req.Header.Set(idempotency.KeyHeader, "a")
				req.Header.Set("X-Idempotency-Key", "a")
			}
			r := s.do(req)
			expectStatus(t, name, r, http.StatusBadRequest)
			if p := problemOf(t, r); p["title"] != "Idempotency-Key is invalid" {
				t.Fatalf("problem = %v", p)
			}
		})
	}
	if c.count() != 0 {
		t.Fatalf("handler ran %d times, want 0", c.count())
	}
	if got := s.events.count(idempotency.KindInvalidKey); got != len(cases) {
		t.Fatalf("invalid_key events = %d, want %d", got, len(cases))
	}

	t.Run("quoted_and_bare_are_one_key", func(t *testing.T) {
		expectStatus(t, "bare", s.post(t, "abc-1", "x"), http.StatusCreated)
		for _, v := range []string{`"abc-1"`, "abc-1", " abc-1 "} {
			r := s.post(t, v, "x")
			if r.header.Get(idempotency.ReplayedHeader) != "true" {
				t.Fatalf("key %q: not replayed (status %d)", v, r.status)
			}
		}
		req, _ := http.NewRequest(http.MethodPost, s.url+"/orders", strings.NewReader("x"))
		req.Header.Set("X-Idempotency-Key", "abc-1")
		if r := s.do(req); r.header.Get(idempotency.ReplayedHeader) != "true" {
			t.Fatalf("X-Idempotency-Key: not replayed (status %d)", r.status)
		}
		expectStatus(t, "escaped quote", s.post(t, `"a\"b"`, "x"), http.StatusCreated)
		if c.count() != 2 {
			t.Fatalf("handler ran %d times, want 2", c.count())
		}
	})
}

func TestMethodsPassThrough(t *testing.T) {
	cases := []struct {
		name    string
		methods []string
		method  string
		runs    int
	}{
		{"get_default", nil, http.MethodGet, 3},
		{"put_default", nil, http.MethodPut, 3},
		{"delete_default", nil, http.MethodDelete, 3},
		{"post_default", nil, http.MethodPost, 1},
		{"patch_default", nil, http.MethodPatch, 1},
		{"put_configured", []string{http.MethodPut}, http.MethodPut, 1},
		{"post_not_configured", []string{http.MethodPut}, http.MethodPost, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &counter{}
			s := newServer(t, c, memory(), idempotency.Options{Methods: tc.methods, RequireKey: true})
			for range 3 {
				expectStatus(t, tc.method, s.send(t, tc.method, "/orders", "k", "x"), http.StatusCreated)
			}
			if c.count() != tc.runs {
				t.Fatalf("%s: handler ran %d times, want %d", tc.method, c.count(), tc.runs)
			}
			if tc.runs == 3 && len(s.events.kinds()) != 0 {
				t.Fatalf("pass-through reported events %v", s.events.kinds())
			}
		})
	}
}

func TestStatusesRecordedOrReleased(t *testing.T) {
	never := func(int) bool { return false }
	cases := []struct {
		name     string
		status   int
		release  func(int) bool
		recorded bool
	}{
		{"200", 200, nil, true},
		{"201", 201, nil, true},
		{"204", 204, nil, true},
		{"400", 400, nil, true},
		{"404", 404, nil, true},
		{"409", 409, nil, true},
		{"408", 408, nil, false},
		{"429", 429, nil, false},
		{"499", 499, nil, false},
		{"500", 500, nil, false},
		{"502", 502, nil, false},
		{"503", 503, nil, false},
		{"500_recorded_by_choice", 500, never, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &counter{status: tc.status}
			s := newServer(t, c, memory(), idempotency.Options{Release: tc.release})
			first := s.post(t, "k", "x")
			expectStatus(t, "first", first, tc.status)
			wantHeader := ""
			if !tc.recorded {
				wantHeader = "false"
			}
			if got := first.header.Get(idempotency.RecordedHeader); got != wantHeader {
				t.Fatalf("%s = %q, want %q", idempotency.RecordedHeader, got, wantHeader)
			}
			second := s.post(t, "k", "x")
			expectStatus(t, "second", second, tc.status)
			wantRuns, replayed := 2, ""
			if tc.recorded {
				wantRuns, replayed = 1, "true"
			}
			if c.count() != wantRuns || second.header.Get(idempotency.ReplayedHeader) != replayed {
				t.Fatalf("runs = %d, replayed = %q; want %d, %q", c.count(), second.header.Get(idempotency.ReplayedHeader), wantRuns, replayed)
			}
			if tc.recorded && second.body != first.body {
				t.Fatalf("replayed body %q, want %q", second.body, first.body)
			}
			wantNotRecorded := 0
			if !tc.recorded {
				wantNotRecorded = 2
			}
			if got := s.events.count(idempotency.KindNotRecorded); got != wantNotRecorded {
				t.Fatalf("not_recorded events = %d, want %d", got, wantNotRecorded)
			}
		})
	}
}

func TestPanicReleasesTheKey(t *testing.T) {
	runs := 0
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		if runs == 1 {
			panic("boom")
		}
		w.WriteHeader(http.StatusCreated)
	})
	s := newServer(t, next, memory(), idempotency.Options{})
	if r := s.post(t, "k", "x"); r.err == nil {
		t.Fatalf("panicking handler: got status %d, want the connection dropped (the panic reaches net/http)", r.status)
	}
	expectStatus(t, "retry after the panic", s.post(t, "k", "x"), http.StatusCreated)
	if r := s.post(t, "k", "x"); r.header.Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("third request not replayed (status %d)", r.status)
	}
	if runs != 2 {
		t.Fatalf("handler ran %d times, want 2", runs)
	}
	want := []idempotency.Kind{idempotency.KindExecuted, idempotency.KindNotRecorded, idempotency.KindExecuted, idempotency.KindReplayed}
	if got := s.events.kinds(); !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
}

func TestTakeoverAfterLockTTLIsFenced(t *testing.T) {
	fc := clockwork.NewFakeClock()
	store := idempotency.NewMemoryStore(idempotency.MemoryOptions{Clock: fc})
	entered := make(chan struct{}, 2)
	proceed := newGate()
	calls := 0
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		first := calls == 1
		entered <- struct{}{}
		if first {
			<-proceed.wait() // hangs past its lock
			io.WriteString(w, "first owner")
			return
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "second owner")
	})
	s := newServer(t, next, store, idempotency.Options{LockTTL: time.Minute})
	proceed.openAtEnd(t)

	firstDone := make(chan reply, 1)
	go func() { firstDone <- s.post(t, "k", "x") }()
	<-entered
	fc.Advance(time.Minute - time.Millisecond)
	expectStatus(t, "before the lock expires", s.post(t, "k", "x"), http.StatusConflict)
	fc.Advance(time.Millisecond)
	second := s.post(t, "k", "x")
	expectStatus(t, "takeover", second, http.StatusCreated)
	if second.body != "second owner" {
		t.Fatalf("takeover body %q", second.body)
	}
	proceed.open()
	first := <-firstDone
	expectStatus(t, "stale first owner", first, http.StatusOK)
	if first.body != "first owner" || first.header.Get(idempotency.RecordedHeader) != "false" {
		t.Fatalf("stale owner: body %q, %s = %q; want its own body, not recorded",
			first.body, idempotency.RecordedHeader, first.header.Get(idempotency.RecordedHeader))
	}
	third := s.post(t, "k", "x")
	expectStatus(t, "replay", third, http.StatusCreated)
	if third.body != "second owner" || third.header.Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("replay after takeover: %q, want the second owner's response", third.body)
	}
	for kind, want := range map[idempotency.Kind]int{
		idempotency.KindTakeover: 1, idempotency.KindFenced: 1, idempotency.KindExecuted: 2,
		idempotency.KindConflict: 1, idempotency.KindReplayed: 1,
	} {
		if got := s.events.count(kind); got != want {
			t.Fatalf("%s events = %d, want %d (all: %v)", kind, got, want, s.events.kinds())
		}
	}
}

func TestResponseExpires(t *testing.T) {
	fc := clockwork.NewFakeClock()
	c := &counter{}
	s := newServer(t, c, idempotency.NewMemoryStore(idempotency.MemoryOptions{Clock: fc}),
		idempotency.Options{ResponseTTL: time.Hour})
	expectStatus(t, "first", s.post(t, "k", "x"), http.StatusCreated)
	fc.Advance(time.Hour - time.Millisecond)
	if r := s.post(t, "k", "x"); r.body != "run 1" || r.header.Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("before expiry: body %q, want the replay of run 1", r.body)
	}
	fc.Advance(time.Millisecond)
	if r := s.post(t, "k", "x"); r.body != "run 2" || r.header.Get(idempotency.ReplayedHeader) != "" {
		t.Fatalf("after expiry: body %q, want a new run", r.body)
	}
}

func TestRequestBodyTooLarge(t *testing.T) {
	c := &counter{}
	s := newServer(t, c, memory(), idempotency.Options{MaxRequestBody: 10})
	expectStatus(t, "10 bytes", s.post(t, "a", "0123456789"), http.StatusCreated)
	r := s.post(t, "b", "0123456789X")
	expectStatus(t, "11 bytes", r, http.StatusRequestEntityTooLarge)
	problemOf(t, r)
	// Unknown length: read up to the limit, then refused.
	req, _ := http.NewRequest(http.MethodPost, s.url+"/orders", io.MultiReader(strings.NewReader("0123456789"), strings.NewReader("X")))
	req.Header.Set(idempotency.KeyHeader, "c")
	expectStatus(t, "11 bytes, chunked", s.do(req), http.StatusRequestEntityTooLarge)
	if c.count() != 1 || s.events.count(idempotency.KindRequestTooLarge) != 2 {
		t.Fatalf("runs = %d, request_too_large = %d; want 1, 2", c.count(), s.events.count(idempotency.KindRequestTooLarge))
	}
}

// failingStore fails every call.
type failingStore struct{}

var errDown = errors.New("store down")

func (failingStore) Reserve(context.Context, string, string, time.Duration) (idempotency.Reservation, error) {
	return idempotency.Reservation{}, errDown
}
func (failingStore) Complete(context.Context, string, idempotency.Token, *idempotency.Response, time.Duration) error {
	return errDown
}
func (failingStore) Release(context.Context, string, idempotency.Token) error { return errDown }

func TestStoreFailureRefusesToRun(t *testing.T) {
	c := &counter{}
	s := newServer(t, c, failingStore{}, idempotency.Options{})
	r := s.post(t, "k", "x")
	expectStatus(t, "store down", r, http.StatusServiceUnavailable)
	if r.header.Get("Retry-After") != "1" {
		t.Fatalf("Retry-After = %q, want 1", r.header.Get("Retry-After"))
	}
	problemOf(t, r)
	if c.count() != 0 || s.events.count(idempotency.KindStoreError) != 1 {
		t.Fatalf("runs = %d, store_error = %d; want 0, 1", c.count(), s.events.count(idempotency.KindStoreError))
	}
}

// completeFailingStore fails every Complete and passes the rest on.
type completeFailingStore struct{ idempotency.Store }

func (completeFailingStore) Complete(context.Context, string, idempotency.Token, *idempotency.Response, time.Duration) error {
	return errDown
}

// A Complete that fails after next ran leaves the key held until its lock
// expires, even when the store could release it: whether the response was
// recorded is unknown, and a retry must not run next again.
func TestFailedCompleteLeavesTheLock(t *testing.T) {
	c := &counter{}
	s := newServer(t, c, completeFailingStore{memory()}, idempotency.Options{})
	expectStatus(t, "first", s.post(t, "k", "x"), http.StatusCreated)
	expectStatus(t, "retry within the lock", s.post(t, "k", "x"), http.StatusConflict)
	if c.count() != 1 || s.events.count(idempotency.KindStoreError) != 1 {
		t.Fatalf("runs = %d, store_error = %d; want 1, 1", c.count(), s.events.count(idempotency.KindStoreError))
	}
}

func TestKeyScope(t *testing.T) {
	c := &counter{}
	store := &recordingStore{Store: memory()}
	s := newServer(t, c, store, idempotency.Options{
		KeyScope: func(r *http.Request) string { return r.Header.Get("X-Account") },
	})
	for _, account := range []string{"alice", "bob", "alice"} {
		req, _ := http.NewRequest(http.MethodPost, s.url+"/orders", strings.NewReader("x"))
		req.Header.Set(idempotency.KeyHeader, "k")
		req.Header.Set("X-Account", account)
		expectStatus(t, account, s.do(req), http.StatusCreated)
	}
	if c.count() != 2 {
		t.Fatalf("handler ran %d times, want 2 (one per account)", c.count())
	}
	if got := store.keys(); !slices.Equal(got, []string{"alice\x00k", "bob\x00k", "alice\x00k"}) {
		t.Fatalf("store keys = %q", got)
	}
}

// recordingStore records the keys it is asked to reserve.
type recordingStore struct {
	idempotency.Store
	mu   sync.Mutex
	seen []string
}

func (s *recordingStore) Reserve(ctx context.Context, key, fp string, ttl time.Duration) (idempotency.Reservation, error) {
	s.mu.Lock()
	s.seen = append(s.seen, key)
	s.mu.Unlock()
	return s.Store.Reserve(ctx, key, fp, ttl)
}

func (s *recordingStore) keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen)
}

func TestEventsCarryMethodRouteAndStatus(t *testing.T) {
	mux := http.NewServeMux()
	ev := &events{}
	c := &counter{}
	mux.Handle("POST /orders/{id}", idempotency.Handler(c, memory(), idempotency.Options{OnEvent: ev.add}))
	s := newServer(t, mux, memory(), idempotency.Options{Methods: []string{"NONE"}})
	s.send(t, http.MethodPost, "/orders/secret-42", "k", "x")
	s.send(t, http.MethodPost, "/orders/secret-42", "k", "x")
	want := []idempotency.Event{
		{Kind: idempotency.KindExecuted, Method: "POST", Route: "POST /orders/{id}", Status: 201},
		{Kind: idempotency.KindReplayed, Method: "POST", Route: "POST /orders/{id}", Status: 201},
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if !slices.Equal(ev.list, want) {
		t.Fatalf("events = %+v, want %+v", ev.list, want)
	}
}

func TestHandlerPanicsOnNilArguments(t *testing.T) {
	for name, f := range map[string]func(){
		"nil_next":  func() { idempotency.Handler(nil, memory(), idempotency.Options{}) },
		"nil_store": func() { idempotency.Handler(&counter{}, nil, idempotency.Options{}) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if msg, _ := recover().(string); !strings.HasPrefix(msg, "idempotency: ") {
					t.Fatalf("recovered %q, want an idempotency: message", msg)
				}
			}()
			f()
		})
	}
}

func TestResponseTheStoreCannotHoldIsNotRecorded(t *testing.T) {
	c := &counter{}
	// Room for a reservation (a 1-byte key and a 64-byte fingerprint), not
	// for it with a response.
	store := idempotency.NewMemoryStore(idempotency.MemoryOptions{MaxBytes: 80})
	s := newServer(t, c, store, idempotency.Options{})
	for i := range 2 {
		r := s.post(t, "k", "x")
		expectStatus(t, "store full", r, http.StatusCreated)
		if r.header.Get(idempotency.RecordedHeader) != "false" || r.header.Get(idempotency.ReplayedHeader) != "" {
			t.Fatalf("request %d: %s = %q, replayed %q; want a fresh, unrecorded response", i,
				idempotency.RecordedHeader, r.header.Get(idempotency.RecordedHeader), r.header.Get(idempotency.ReplayedHeader))
		}
	}
	// ErrStoreFull is not a store failure: the key is freed, as its
	// documentation says for not_recorded.
	if c.count() != 2 || s.events.count(idempotency.KindNotRecorded) != 2 || s.events.count(idempotency.KindStoreError) != 0 {
		t.Fatalf("runs = %d, not_recorded = %d, store_error = %d; want 2, 2, 0 (the key freed each time)",
			c.count(), s.events.count(idempotency.KindNotRecorded), s.events.count(idempotency.KindStoreError))
	}
}

// TestInvalidStatusDoesNotPoisonTheKey: WriteHeader with a status net/http
// rejects panics at the call, as net/http's own WriteHeader does; nothing
// is recorded, the key is freed, and a retry runs the handler again.
func TestInvalidStatusDoesNotPoisonTheKey(t *testing.T) {
	for _, code := range []int{0, 99, 1000, -200} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			var runs atomic.Int32
			panics := make(chan any, 1)
			s := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if runs.Add(1) == 1 {
					defer func() {
						p := recover()
						panics <- p
						panic(p)
					}()
					w.WriteHeader(code)
					return
				}
				w.WriteHeader(http.StatusCreated)
				io.WriteString(w, "placed")
			}), memory(), idempotency.Options{})
			if r := s.post(t, "k", "x"); r.err == nil {
				t.Fatalf("first: %d %q; want the connection dropped by the panic", r.status, r.body)
			}
			if got, want := <-panics, "invalid WriteHeader code "+strconv.Itoa(code); got != want {
				t.Fatalf("panic %v, want %q", got, want)
			}
			r := s.post(t, "k", "x")
			expectStatus(t, "retry", r, http.StatusCreated)
			if r.body != "placed" || r.header.Get(idempotency.ReplayedHeader) != "" || runs.Load() != 2 {
				t.Fatalf("retry: %q, replayed %q, runs %d; want a fresh run 2", r.body, r.header.Get(idempotency.ReplayedHeader), runs.Load())
			}
			if got := s.events.count(idempotency.KindNotRecorded); got != 1 {
				t.Fatalf("not_recorded = %d, want 1", got)
			}
		})
	}
}

// TestBodyCutByOuterMaxBytesReaderIs413: a request body an outer layer
// limits with http.MaxBytesReader is answered 413, request_too_large.
func TestBodyCutByOuterMaxBytesReaderIs413(t *testing.T) {
	c := &counter{}
	ev := &events{}
	h := idempotency.Handler(c, memory(), idempotency.Options{OnEvent: ev.add})
	url := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 4)
		h.ServeHTTP(w, r)
	}))
	s := &server{url: url, client: &http.Client{}, events: ev}
	t.Cleanup(s.client.CloseIdleConnections)
	r := s.post(t, "k", "0123456789")
	expectStatus(t, "over the outer limit", r, http.StatusRequestEntityTooLarge)
	problemOf(t, r)
	if c.count() != 0 || ev.count(idempotency.KindRequestTooLarge) != 1 {
		t.Fatalf("runs = %d, request_too_large = %d; want 0, 1", c.count(), ev.count(idempotency.KindRequestTooLarge))
	}
}

// TestUnreadableBodyHasItsOwnKind: a request body that fails to read is
// answered 400 and reported as request_unreadable.
func TestUnreadableBodyHasItsOwnKind(t *testing.T) {
	c := &counter{}
	ev := &events{}
	h := idempotency.Handler(c, memory(), idempotency.Options{OnEvent: ev.add})
	req := httptest.NewRequest(http.MethodPost, "/orders", io.MultiReader(strings.NewReader("par"), iotest.ErrReader(io.ErrUnexpectedEOF)))
	req.Header.Set(idempotency.KeyHeader, "k")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusBadRequest || w.Header().Get("Connection") != "close" {
		t.Fatalf("got %d, Connection %q; want 400, close", w.Code, w.Header().Get("Connection"))
	}
	want := []idempotency.Kind{idempotency.KindRequestUnreadable}
	if got := ev.kinds(); !slices.Equal(got, want) || ev.list[0].Status != http.StatusBadRequest {
		t.Fatalf("events = %+v, want one request_unreadable with status 400", ev.list)
	}
	if c.count() != 0 {
		t.Fatalf("runs = %d, want 0", c.count())
	}
}

// TestFullStoreRefusesNewKeysAndKeepsReplays: when the store is full of
// recorded responses, a new key is refused with 503 and Retry-After, and
// every recorded response is still replayed within its TTL.
func TestFullStoreRefusesNewKeysAndKeepsReplays(t *testing.T) {
	c := &counter{}
	s := newServer(t, c, idempotency.NewMemoryStore(idempotency.MemoryOptions{MaxEntries: 2}), idempotency.Options{})
	expectStatus(t, "a", s.post(t, "a", "x"), http.StatusCreated)
	expectStatus(t, "b", s.post(t, "b", "x"), http.StatusCreated)
	r := s.post(t, "c", "x")
	expectStatus(t, "new key in a full store", r, http.StatusServiceUnavailable)
	if r.header.Get("Retry-After") != "1" {
		t.Fatalf("Retry-After = %q, want 1", r.header.Get("Retry-After"))
	}
	for i, k := range []string{"a", "b"} {
		r := s.post(t, k, "x")
		expectStatus(t, "replay "+k, r, http.StatusCreated)
		if want := "run " + strconv.Itoa(i+1); r.body != want || r.header.Get(idempotency.ReplayedHeader) != "true" {
			t.Fatalf("%s: %q, replayed %q; want the replay of %q", k, r.body, r.header.Get(idempotency.ReplayedHeader), want)
		}
	}
	if c.count() != 2 {
		t.Fatalf("runs = %d, want 2", c.count())
	}
}

// TestSameKeyForAnotherHostIsReplayedUnlessTheHostIsInKeyScope: one
// Handler (or one store) serving several hosts sees the same key,
// credentials, path and body sent to another host. The host is not part
// of the fingerprint, so that a retry reaching another instance by its
// own address is replayed: without KeyScope the other host's request gets
// the first host's recorded response. A service that tells tenants apart
// by host puts the host in KeyScope: each host then has keys of its own,
// the other host's request runs the handler for that host and never sees
// the first host's response, and each host's retry replays its own.
func TestSameKeyForAnotherHostIsReplayedUnlessTheHostIsInKeyScope(t *testing.T) {
	for _, tt := range []struct {
		name     string
		scope    func(r *http.Request) string
		scoped   bool
		wantRuns int32
	}{
		{name: "no KeyScope: the host is not compared", wantRuns: 1},
		{name: "the host in KeyScope", scope: func(r *http.Request) string { return r.Host }, scoped: true, wantRuns: 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var runs atomic.Int32
			s := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				w.WriteHeader(http.StatusCreated)
				io.WriteString(w, "order for "+r.Host)
			}), memory(), idempotency.Options{KeyScope: tt.scope})
			send := func(host string) reply {
				req, err := http.NewRequest(http.MethodPost, s.url+"/orders", strings.NewReader("x"))
				if err != nil {
					t.Fatal(err)
				}
				req.Host = host
				req.Header.Set("Authorization", "Bearer one-token-for-both-tenants")
				req.Header.Set(idempotency.KeyHeader, "k")
				return s.do(req)
			}
			first := send("acme.example.com")
			expectStatus(t, "first", first, http.StatusCreated)
			if first.body != "order for acme.example.com" || first.header.Get(idempotency.ReplayedHeader) != "" {
				t.Fatalf("first: body %q, replayed %q", first.body, first.header.Get(idempotency.ReplayedHeader))
			}
			other := send("globex.example.com")
			expectStatus(t, "other host", other, http.StatusCreated)
			if tt.scoped {
				if other.body != "order for globex.example.com" || other.header.Get(idempotency.ReplayedHeader) != "" {
					t.Fatalf("other host: %q, replayed %q; want its own run", other.body, other.header.Get(idempotency.ReplayedHeader))
				}
			} else if other.body != "order for acme.example.com" || other.header.Get(idempotency.ReplayedHeader) != "true" {
				t.Fatalf("other host: %q, replayed %q; want the first host's response replayed", other.body, other.header.Get(idempotency.ReplayedHeader))
			}
			for _, host := range []string{"acme.example.com", "globex.example.com"} {
				retry := send(host)
				expectStatus(t, "retry on "+host, retry, http.StatusCreated)
				want := "order for " + host
				if !tt.scoped {
					want = "order for acme.example.com"
				}
				if retry.body != want || retry.header.Get(idempotency.ReplayedHeader) != "true" {
					t.Fatalf("retry on %s: %q, replayed %q; want %q replayed", host, retry.body, retry.header.Get(idempotency.ReplayedHeader), want)
				}
			}
			if got := runs.Load(); got != tt.wantRuns {
				t.Fatalf("runs = %d, want %d", got, tt.wantRuns)
			}
		})
	}
}

// TestNestedHandlersRunTheOperationOnce: a service wraps its whole mux with
// a Handler and one route again, with RequireKey, over the same store. A
// keyed request to that route is the outer Handler's to deduplicate: the
// inner one passes it through instead of finding the key reserved (by the
// outer) and answering 409 — which the outer would record and replay for
// the key's whole TTL, so the operation would never run.
func TestNestedHandlersRunTheOperationOnce(t *testing.T) {
	store := memory()
	c := &counter{}
	mux := http.NewServeMux()
	mux.Handle("POST /orders", idempotency.Handler(c, store, idempotency.Options{RequireKey: true}))
	s := newServer(t, mux, store, idempotency.Options{})
	first := s.post(t, "k", "x")
	expectStatus(t, "first", first, http.StatusCreated)
	if first.body != "run 1" {
		t.Fatalf("first: %q, want run 1", first.body)
	}
	retry := s.post(t, "k", "x")
	expectStatus(t, "retry", retry, http.StatusCreated)
	if retry.body != "run 1" || retry.header.Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("retry: %q, replayed %q; want the replay of run 1", retry.body, retry.header.Get(idempotency.ReplayedHeader))
	}
	if c.count() != 1 {
		t.Fatalf("runs = %d, want 1", c.count())
	}
	expectStatus(t, "inner still requires a key", s.post(t, "", "x"), http.StatusBadRequest)
}

// TestNestedHandlerOverAnotherStoreStillRecords: a Handler nested inside
// another over a store of its own (a shared store inside a local one)
// still deduplicates in its store: a retry that reaches it without the
// outer record (another instance, with its own local store) is replayed
// there, and the operation runs once.
func TestNestedHandlerOverAnotherStoreStillRecords(t *testing.T) {
	shared := memory()
	c := &counter{}
	instance := func() *server {
		inner := idempotency.Handler(c, shared, idempotency.Options{RequireKey: true})
		return newServer(t, inner, memory(), idempotency.Options{})
	}
	a, b := instance(), instance()
	expectStatus(t, "instance a", a.post(t, "k", "x"), http.StatusCreated)
	r := b.post(t, "k", "x")
	expectStatus(t, "instance b", r, http.StatusCreated)
	if r.body != "run 1" || r.header.Get(idempotency.ReplayedHeader) != "true" || c.count() != 1 {
		t.Fatalf("instance b: %q, replayed %q, runs %d; want the replay of run 1", r.body, r.header.Get(idempotency.ReplayedHeader), c.count())
	}
}

// TestInnerInProgressConflictIsNotRecorded: instance A runs the operation
// under a shared store; a retry reaches instance B, whose local Handler
// wraps the same shared one. The shared Handler answers B "in progress"
// (409 with Retry-After): that says "ask again", so B's local Handler must
// not record it as the key's response. Once A finishes, the retry through
// B gets A's response, not a replayed 409 that httpretry would take as
// final.
func TestInnerInProgressConflictIsNotRecorded(t *testing.T) {
	shared := memory()
	entered, proceed := make(chan struct{}), newGate()
	var runs atomic.Int32
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		if n == 1 {
			close(entered)
			<-proceed.wait()
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "run "+strconv.Itoa(int(n)))
	})
	instance := func() *server {
		return newServer(t, idempotency.Handler(next, shared, idempotency.Options{}), memory(), idempotency.Options{})
	}
	a, b := instance(), instance()
	proceed.openAtEnd(t)
	done := make(chan reply, 1)
	go func() { done <- a.post(t, "k", "x") }()
	<-entered
	r := b.post(t, "k", "x")
	expectStatus(t, "b while a runs", r, http.StatusConflict)
	if r.header.Get("Retry-After") == "" || r.header.Get(idempotency.ReplayedHeader) != "" {
		t.Fatalf("b while a runs: Retry-After %q, replayed %q; want the in-progress 409", r.header.Get("Retry-After"), r.header.Get(idempotency.ReplayedHeader))
	}
	proceed.open()
	expectStatus(t, "a", <-done, http.StatusCreated)
	r = b.post(t, "k", "x")
	expectStatus(t, "b after a", r, http.StatusCreated)
	if r.body != "run 1" || r.header.Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("b after a: %q, replayed %q; want the replay of run 1", r.body, r.header.Get(idempotency.ReplayedHeader))
	}
	if got := runs.Load(); got != 1 {
		t.Fatalf("runs = %d, want 1", got)
	}
}

// TestSubrequestsWithTheirOwnKeysAreDeduplicated: a batch endpoint, under
// a Handler, dispatches its items in process through the mux, each with
// the item's own key, on the batch request's context. Those are other
// requests than the batch, with other keys: the item route's Handler
// deduplicates them, so a second batch (a new batch key) that carries an
// item already placed gets that item's replay, and the item runs once.
func TestSubrequestsWithTheirOwnKeysAreDeduplicated(t *testing.T) {
	store := memory()
	item := &counter{}
	mux := http.NewServeMux()
	mux.Handle("POST /items", idempotency.Handler(item, store, idempotency.Options{RequireKey: true}))
	mux.Handle("POST /batch", idempotency.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sub := httptest.NewRequestWithContext(r.Context(), http.MethodPost, "/items", strings.NewReader("item"))
		sub.Header.Set(idempotency.KeyHeader, "item-1")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, sub)
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, rec.Body.String()+", replayed "+rec.Header().Get(idempotency.ReplayedHeader))
	}), store, idempotency.Options{RequireKey: true}))
	s := newServer(t, mux, store, idempotency.Options{})
	first := s.send(t, http.MethodPost, "/batch", "batch-1", "[item-1]")
	expectStatus(t, "first batch", first, http.StatusCreated)
	second := s.send(t, http.MethodPost, "/batch", "batch-2", "[item-1]")
	expectStatus(t, "second batch", second, http.StatusCreated)
	if first.body != "run 1, replayed " || second.body != "run 1, replayed true" || item.count() != 1 {
		t.Fatalf("batches: %q, %q; item runs %d; want run 1, then its replay, and 1 run", first.body, second.body, item.count())
	}
}

// taggedStore is a Store value whose type is comparable, but whose
// comparison panics when its tag holds a slice.
type taggedStore struct {
	idempotency.Store
	tag any
}

// TestNestedHandlersOverUncomparableStoresNeverPanic: Handlers nested over
// store values that == cannot compare (they panic) answer every request
// and never run the operation twice. Whether the two are the same store
// cannot be told, so the inner one does not pass the request through: it
// may answer 409 (the key is the outer one's), which is not recorded.
func TestNestedHandlersOverUncomparableStoresNeverPanic(t *testing.T) {
	shared := memory()
	c := &counter{}
	inner := idempotency.Handler(c, taggedStore{Store: shared, tag: []string{"inner"}}, idempotency.Options{})
	s := newServer(t, inner, taggedStore{Store: shared, tag: []string{"outer"}}, idempotency.Options{})
	for i := range 3 {
		r := s.post(t, "k", "x")
		if r.err != nil {
			t.Fatalf("request %d: %v (the handler panicked?)", i, r.err)
		}
		if r.status != http.StatusConflict && r.status != http.StatusCreated {
			t.Fatalf("request %d: %d %q, want 409 or 201", i, r.status, r.body)
		}
	}
	if c.count() > 1 {
		t.Fatalf("runs = %d, want at most 1", c.count())
	}
}
