package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry/idempotency"
)

// memTx is a transaction of txMemory: the rows it wrote and the response
// it recorded, applied at commit.
type memTx struct {
	rows   []string
	record *pendingRecord
}

type pendingRecord struct {
	key   string
	token idempotency.Token
	resp  *idempotency.Response
	ttl   time.Duration
}

// txMemory is a TxStore over a MemoryStore whose transactions apply
// their rows and record at commit, with faults to inject and every call
// counted: the TxHandler's order of calls, seen from the store.
type txMemory struct {
	*idempotency.MemoryStore
	mu                               sync.Mutex
	rows                             []string
	begins, commits, rollbacks       int
	releases                         int
	beginErr, completeErr, commitErr error
	// commitApplies makes a failing commit apply anyway (its
	// acknowledgement was lost after the database committed).
	commitApplies bool
}

func newTxMemory() *txMemory {
	return &txMemory{MemoryStore: idempotency.NewMemoryStore(idempotency.MemoryOptions{})}
}

func (s *txMemory) BeginTx(context.Context) (*memTx, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.begins++
	if s.beginErr != nil {
		return nil, s.beginErr
	}
	return &memTx{}, nil
}

func (s *txMemory) CompleteTx(_ context.Context, tx *memTx, key string, token idempotency.Token, resp *idempotency.Response, ttl time.Duration) error {
	if s.completeErr != nil {
		return s.completeErr
	}
	tx.record = &pendingRecord{key, token, resp.Clone(), ttl}
	return nil
}

func (s *txMemory) CommitTx(ctx context.Context, tx *memTx) error {
	s.mu.Lock()
	s.commits++
	apply := s.commitErr == nil || s.commitApplies
	err := s.commitErr
	s.mu.Unlock()
	if !apply {
		return err
	}
	if tx.record != nil {
		if e := s.MemoryStore.Complete(ctx, tx.record.key, tx.record.token, tx.record.resp, tx.record.ttl); e != nil {
			return errors.Join(idempotency.ErrNotCommitted, e)
		}
	}
	s.mu.Lock()
	s.rows = append(s.rows, tx.rows...)
	s.mu.Unlock()
	return err
}

func (s *txMemory) RollbackTx(context.Context, *memTx) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rollbacks++
	return nil
}

func (s *txMemory) Release(ctx context.Context, key string, token idempotency.Token) error {
	s.mu.Lock()
	s.releases++
	s.mu.Unlock()
	return s.MemoryStore.Release(ctx, key, token)
}

// counts returns begins, commits, rollbacks, releases and rows.
func (s *txMemory) counts() [5]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return [5]int{s.begins, s.commits, s.rollbacks, s.releases, len(s.rows)}
}

// TestTxHandlerSettlesEachOutcome: what the TxHandler does with each
// outcome of the handler and of the store — commits (and sends) or rolls
// back, releases the key or leaves its lock, and what the client gets —
// counted from the store's side.
func TestTxHandlerSettlesEachOutcome(t *testing.T) {
	errDown := errors.New("connection reset")
	cases := []struct {
		name   string
		status int // the handler's answer; 0: panics; -1: a body over the limit
		setup  func(s *txMemory)
		// want: the client's status; counts: begins, commits, rollbacks,
		// releases, rows; replay: the retry's status (0: runs again).
		want     int
		recorded string // the client's Idempotent-Recorded
		counts   [5]int
		replayed bool
		events   string // the OnEvent kinds of the first request, in order
	}{
		{name: "created_commits_then_sends", status: 201, want: 201, counts: [5]int{1, 1, 0, 0, 1}, replayed: true, events: "executed"},
		{name: "final_4xx_is_recorded", status: 402, want: 402, counts: [5]int{1, 1, 0, 0, 1}, replayed: true, events: "executed"},
		{name: "5xx_rolls_back_and_releases", status: 500, want: 500, recorded: "false", counts: [5]int{1, 0, 1, 1, 0}, events: "executed not_recorded"},
		{name: "panic_rolls_back_and_releases", status: 0, want: 0, counts: [5]int{1, 0, 1, 1, 0}, events: "executed not_recorded"},
		{name: "body_over_limit_rolls_back", status: -1, want: 500, counts: [5]int{1, 0, 1, 1, 0}, events: "executed not_recorded"},
		{name: "stale_token_rolls_back_unreleased", status: 201, setup: func(s *txMemory) { s.completeErr = idempotency.ErrStaleToken },
			want: 409, counts: [5]int{1, 0, 1, 0, 0}, events: "executed fenced"},
		{name: "complete_error_rolls_back_and_releases", status: 201, setup: func(s *txMemory) { s.completeErr = errDown },
			want: 503, counts: [5]int{1, 0, 1, 1, 0}, events: "executed not_recorded store_error"},
		{name: "begin_error_releases", status: 201, setup: func(s *txMemory) { s.beginErr = errDown },
			want: 503, counts: [5]int{1, 0, 0, 1, 0}, events: "not_recorded store_error"},
		{name: "not_committed_releases", status: 201, setup: func(s *txMemory) { s.commitErr = idempotency.ErrNotCommitted },
			want: 503, counts: [5]int{1, 1, 0, 1, 0}, events: "executed not_recorded store_error"},
		{name: "lost_ack_after_commit_never_releases", status: 201, setup: func(s *txMemory) { s.commitErr = errDown; s.commitApplies = true },
			want: 503, counts: [5]int{1, 1, 0, 0, 1}, replayed: true, events: "executed store_error"},
		{name: "lost_ack_before_commit_never_releases", status: 201, setup: func(s *txMemory) { s.commitErr = errDown },
			want: 503, counts: [5]int{1, 1, 0, 0, 0}, events: "executed store_error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newTxMemory()
			if c.setup != nil {
				c.setup(s)
			}
			var evs events
			h := idempotency.TxHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tx, ok := idempotency.TxFrom[*memTx](r.Context())
				if !ok {
					t.Error("no transaction in the handler's context")
				}
				tx.rows = append(tx.rows, "charge")
				switch c.status {
				case 0:
					panic("handler failed")
				case -1:
					w.Write([]byte(strings.Repeat("x", 100)))
					return
				}
				w.WriteHeader(c.status)
				io.WriteString(w, "answer")
			}), s, idempotency.Options{MaxResponseBody: 50, OnEvent: evs.add})
			srv := httptest.NewServer(recoverPanics(h))
			defer srv.Close()
			got := keyedPost(t, srv.URL, "k")
			if got.status != c.want {
				t.Fatalf("status = %d, want %d", got.status, c.want)
			}
			if r := got.header.Get(idempotency.RecordedHeader); r != c.recorded {
				t.Fatalf("Idempotent-Recorded = %q, want %q", r, c.recorded)
			}
			if n := s.counts(); n != c.counts {
				t.Fatalf("begins, commits, rollbacks, releases, rows = %v, want %v", n, c.counts)
			}
			if got := fmt.Sprint(evs.kinds()); got != "["+c.events+"]" {
				t.Fatalf("events = %s, want [%s]", got, c.events)
			}
			s.completeErr, s.commitErr, s.beginErr = nil, nil, nil
			retry := keyedPost(t, srv.URL, "k")
			if replayed := retry.header.Get(idempotency.ReplayedHeader) == "true"; replayed != c.replayed && retry.status != http.StatusConflict {
				t.Fatalf("retry replayed = %v (status %d), want %v", replayed, retry.status, c.replayed)
			}
		})
	}
}

// TestTxHandlerSendsNothingBeforeCommit: a handler that flushes its
// response and then waits sends nothing: the client gets no status until
// the transaction commits.
func TestTxHandlerSendsNothingBeforeCommit(t *testing.T) {
	s := newTxMemory()
	proceed := make(chan struct{})
	h := idempotency.TxHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(201)
		io.WriteString(w, "early")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("Flush = %v, want nil (held)", err)
		}
		<-proceed
	}), s, idempotency.Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	got := make(chan answer, 1)
	go func() { got <- keyedPost(t, srv.URL, "k") }()
	select {
	case a := <-got:
		t.Fatalf("the client got %d before the commit", a.status)
	case <-time.After(200 * time.Millisecond):
	}
	if n := s.counts(); n[1] != 0 {
		t.Fatalf("committed before the handler returned: %v", n)
	}
	close(proceed)
	if a := <-got; a.status != 201 || string(a.body) != "early" {
		t.Fatalf("answer = %d %q", a.status, a.body)
	}
	if n := s.counts(); n[1] != 1 {
		t.Fatalf("commits = %d, want 1", n[1])
	}
}

// TestDerivedKeyIsStablePerKeyAndStep: DerivedKey is the same on every
// run of a keyed request, and differs by step, by key and by scope; there
// is none outside a keyed request.
func TestDerivedKeyIsStablePerKeyAndStep(t *testing.T) {
	var mu sync.Mutex
	seen := map[string][]string{}
	h := idempotency.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, okA := idempotency.DerivedKey(r.Context(), "charge")
		b, okB := idempotency.DerivedKey(r.Context(), "refund")
		if !okA || !okB || len(a) != 64 || a == b {
			t.Errorf("derived keys %q %q (%v %v)", a, b, okA, okB)
		}
		mu.Lock()
		seen[r.Header.Get("Idempotency-Key")+"/"+r.Header.Get("X-Account")] = append(seen[r.Header.Get("Idempotency-Key")+"/"+r.Header.Get("X-Account")], a)
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable) // released: every retry runs again
	}), idempotency.NewMemoryStore(idempotency.MemoryOptions{}), idempotency.Options{KeyScope: func(r *http.Request) string { return r.Header.Get("X-Account") }})
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, acct := range []string{"a", "a", "b"} {
		for _, key := range []string{"k1", "k2"} {
			req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
			req.Header.Set("Idempotency-Key", key)
			req.Header.Set("X-Account", acct)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
	}
	if len(seen["k1/a"]) != 2 || seen["k1/a"][0] != seen["k1/a"][1] {
		t.Fatalf("two runs of k1 in scope a derived %v, want one key twice", seen["k1/a"])
	}
	distinct := map[string]bool{seen["k1/a"][0]: true, seen["k2/a"][0]: true, seen["k1/b"][0]: true, seen["k2/b"][0]: true}
	if len(distinct) != 4 {
		t.Fatalf("keys across keys and scopes = %v, want 4 distinct", seen)
	}
	if k, ok := idempotency.DerivedKey(context.Background(), "charge"); ok || k != "" {
		t.Fatalf("DerivedKey outside a keyed request = %q, %v", k, ok)
	}
}

// answer is a response as the client read it.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// keyedPost sends a POST with key; a connection dropped by a panicking
// handler is status 0.
func keyedPost(t *testing.T, url, key string) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("{}"))
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, b}
}

// recoverPanics drops the connection of a panicking handler without
// net/http's log line.
func recoverPanics(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				panic(http.ErrAbortHandler)
			}
		}()
		h.ServeHTTP(w, r)
	})
}
