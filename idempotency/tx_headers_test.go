package idempotency_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/httpretry/httpretry/idempotency"
)

// TestTxHandlerAnswerInPlaceOfARolledBackResponseCarriesNoneOfItsHeaders:
// when a TxHandler's transaction does not commit (the token went stale,
// the store failed, the commit's outcome is unknown, or the response was
// too large to hold), the client gets the TxHandler's own problem, whole:
// none of the headers the handler set for the response that was rolled
// back (its Content-Length, which would cut or break the problem's body,
// its Location or Set-Cookie, which name what was undone) goes out with
// it. Headers an outer layer set before the TxHandler ran stay.
func TestTxHandlerAnswerInPlaceOfARolledBackResponseCarriesNoneOfItsHeaders(t *testing.T) {
	errDown := errors.New("connection reset")
	cases := []struct {
		name   string
		setup  func(s *txMemory)
		length string // the Content-Length the handler declares
		want   int
	}{
		{name: "stale_token", setup: func(s *txMemory) { s.completeErr = idempotency.ErrStaleToken }, length: "6", want: 409},
		{name: "complete_error", setup: func(s *txMemory) { s.completeErr = errDown }, length: "6", want: 503},
		{name: "commit_outcome_unknown", setup: func(s *txMemory) { s.commitErr = errDown }, length: "6", want: 503},
		{name: "declared_length_over_the_limit", length: "1000", want: 500},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newTxMemory()
			if c.setup != nil {
				c.setup(s)
			}
			h := idempotency.TxHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", c.length)
				w.Header().Set("Location", "/charges/42")
				w.Header().Set("Set-Cookie", "receipt=42")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusCreated)
				io.WriteString(w, "answer")
			}), s, idempotency.Options{MaxResponseBody: 50})
			outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Request-Id", "r1")
				h.ServeHTTP(w, r)
			})
			srv := httptest.NewServer(outer)
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
			req.Header.Set("Idempotency-Key", "k")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("reading the %d's body: %v (read %q)", resp.StatusCode, err, body)
			}
			if resp.StatusCode != c.want {
				t.Fatalf("status = %d, want %d", resp.StatusCode, c.want)
			}
			var p struct{ Status int }
			if err := json.Unmarshal(body, &p); err != nil || p.Status != c.want {
				t.Fatalf("body = %q (%v), want the whole problem of a %d", body, err, c.want)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("Content-Type = %q, want application/problem+json", ct)
			}
			for _, f := range []string{"Location", "Set-Cookie"} {
				if v := resp.Header.Get(f); v != "" {
					t.Fatalf("%s = %q: a header of the rolled-back response went out", f, v)
				}
			}
			if v := resp.Header.Get("X-Request-Id"); v != "r1" {
				t.Fatalf("X-Request-Id = %q, want the outer layer's r1", v)
			}
		})
	}
}
