package idempotency_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry/idempotency"
)

// fingerprintStore records the keys and fingerprints it is asked to
// reserve.
type fingerprintStore struct {
	idempotency.Store
	mu           sync.Mutex
	keys, prints []string
}

func (s *fingerprintStore) Reserve(ctx context.Context, key, fp string, ttl time.Duration) (idempotency.Reservation, error) {
	s.mu.Lock()
	s.keys = append(s.keys, key)
	s.prints = append(s.prints, fp)
	s.mu.Unlock()
	return s.Store.Reserve(ctx, key, fp, ttl)
}

// TestKeyFromAnotherCallerNeverGetsTheirResponse: with the default
// options, a key is bound to the credentials that first used it. Another
// caller sending the same key and body gets 422, never the first caller's
// body or headers; the first caller's retry is replayed; no credential
// reaches the store.
func TestKeyFromAnotherCallerNeverGetsTheirResponse(t *testing.T) {
	c := &counter{}
	store := &fingerprintStore{Store: memory()}
	s := newServer(t, c, store, idempotency.Options{})
	post := func(auth string) reply {
		req, _ := http.NewRequest(http.MethodPost, s.url+"/orders", strings.NewReader(`{"amount":100}`))
		req.Header.Set(idempotency.KeyHeader, "k")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		return s.do(req)
	}
	alice, mallory := "Bearer alice-secret-token", "Bearer mallory-token"
	expectStatus(t, "alice", post(alice), http.StatusCreated)

	for _, other := range []string{mallory, "", "Bearer alice-secret-tokeN"} {
		r := post(other)
		expectStatus(t, "another caller "+other, r, http.StatusUnprocessableEntity)
		problemOf(t, r)
		if strings.Contains(r.body, "run 1") || r.header.Get(idempotency.ReplayedHeader) != "" {
			t.Fatalf("another caller (%q) got %q, replayed %q: the first caller's response", other, r.body, r.header.Get(idempotency.ReplayedHeader))
		}
	}
	r := post(alice)
	expectStatus(t, "alice's retry", r, http.StatusCreated)
	if r.body != "run 1" || r.header.Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("alice's retry: %q, replayed %q; want the replay of run 1", r.body, r.header.Get(idempotency.ReplayedHeader))
	}
	if c.count() != 1 || s.events.count(idempotency.KindMismatch) != 3 {
		t.Fatalf("runs = %d, mismatches = %d; want 1, 3", c.count(), s.events.count(idempotency.KindMismatch))
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	for i, fp := range store.prints {
		if store.keys[i] != "k" || strings.Contains(fp, "secret") || strings.Contains(fp, "mallory") {
			t.Fatalf("the store saw key %q, fingerprint %q: a credential, or a key changed", store.keys[i], fp)
		}
	}
	if store.prints[0] == store.prints[1] || store.prints[0] != store.prints[4] {
		t.Fatalf("fingerprints %q: want alice's twice, and mallory's different", store.prints)
	}
}

// TestCallersWithoutCredentialsOrOptedOutShareKeys: requests without
// credentials, and every request once IgnoreCredentials is set, share one
// key space, as before keys were bound to credentials.
func TestCallersWithoutCredentialsOrOptedOutShareKeys(t *testing.T) {
	for _, tc := range []struct {
		name        string
		opts        idempotency.Options
		first, then string
	}{
		{"no_credentials", idempotency.Options{}, "", ""},
		{"ignore_credentials", idempotency.Options{IgnoreCredentials: true}, "Bearer a", "Bearer b"},
		{"key_scope_set", idempotency.Options{KeyScope: func(*http.Request) string { return "account-1" }}, "Bearer old", "Bearer refreshed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &counter{}
			s := newServer(t, c, memory(), tc.opts)
			for i, auth := range []string{tc.first, tc.then} {
				req, _ := http.NewRequest(http.MethodPost, s.url+"/orders", strings.NewReader("x"))
				req.Header.Set(idempotency.KeyHeader, "k")
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				r := s.do(req)
				expectStatus(t, auth, r, http.StatusCreated)
				if r.body != "run 1" || (i == 1) != (r.header.Get(idempotency.ReplayedHeader) == "true") {
					t.Fatalf("request %d: %q, replayed %q; want run 1, replayed the second time", i, r.body, r.header.Get(idempotency.ReplayedHeader))
				}
			}
			if c.count() != 1 {
				t.Fatalf("runs = %d, want 1", c.count())
			}
		})
	}
}

// TestKeyBoundToTLSClientCertificate: a key first used with one client
// certificate is refused (422) with another, and replayed with the same.
func TestKeyBoundToTLSClientCertificate(t *testing.T) {
	c := &counter{}
	h := idempotency.Handler(c, memory(), idempotency.Options{})
	post := func(cert []byte) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "https://api.test/orders", strings.NewReader("x"))
		req.Header.Set(idempotency.KeyHeader, "k")
		req.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{{Raw: cert}}}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	if w := post([]byte("cert of client A")); w.Code != http.StatusCreated {
		t.Fatalf("client A: %d, want 201", w.Code)
	}
	if w := post([]byte("cert of client B")); w.Code != http.StatusUnprocessableEntity || strings.Contains(w.Body.String(), "run 1") {
		t.Fatalf("client B: %d %q, want 422 without A's response", w.Code, w.Body.String())
	}
	w := post([]byte("cert of client A"))
	if w.Code != http.StatusCreated || w.Body.String() != "run 1" || w.Header().Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("client A's retry: %d %q, want the replay of run 1", w.Code, w.Body.String())
	}
	if c.count() != 1 {
		t.Fatalf("runs = %d, want 1", c.count())
	}
}

// TestEmptyScopeStillBindsKeysToCredentials: a KeyScope that finds no
// principal for a request — it reads a session cookie, and this caller
// authenticates with a bearer token — returns "". That is no scope at all:
// the key is then bound to the request's credentials, as without KeyScope,
// so a second caller with other credentials gets 422, never the first
// caller's response.
func TestEmptyScopeStillBindsKeysToCredentials(t *testing.T) {
	c := &counter{}
	s := newServer(t, c, memory(), idempotency.Options{KeyScope: func(r *http.Request) string {
		if cookie, err := r.Cookie("session"); err == nil {
			return "account-of-" + cookie.Value
		}
		return ""
	}})
	send := func(auth string) reply {
		req, _ := http.NewRequest(http.MethodPost, s.url+"/orders", strings.NewReader("x"))
		req.Header.Set(idempotency.KeyHeader, "k")
		req.Header.Set("Authorization", auth)
		return s.do(req)
	}
	expectStatus(t, "alice", send("Bearer alice"), http.StatusCreated)
	mallory := send("Bearer mallory")
	expectStatus(t, "mallory", mallory, http.StatusUnprocessableEntity)
	if strings.Contains(mallory.body, "run 1") {
		t.Fatalf("mallory got alice's response %q", mallory.body)
	}
	retry := send("Bearer alice")
	expectStatus(t, "alice's retry", retry, http.StatusCreated)
	if retry.body != "run 1" || retry.header.Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("alice's retry: %q, replayed %q; want the replay of run 1", retry.body, retry.header.Get(idempotency.ReplayedHeader))
	}
	if c.count() != 1 {
		t.Fatalf("runs = %d, want 1", c.count())
	}
}

// TestSessionCookiesAreNeverReplayedWhateverTheirCase: Set-Cookie is never
// recorded, however the handler spelled the field in its header map
// (net/http sends a non-canonical key as it is, and clients read field
// names without regard to case). Two users of one account share its keys
// (KeyScope is the account): the second, retrying the first's request, is
// replayed the order but never the first user's session.
func TestSessionCookiesAreNeverReplayedWhateverTheirCase(t *testing.T) {
	for _, name := range []string{"set-cookie", "SET-COOKIE", "Set-Cookie"} {
		t.Run(name, func(t *testing.T) {
			c := &counter{}
			s := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header()[name] = []string{"session=of-" + r.Header.Get("X-User")}
				c.ServeHTTP(w, r)
			}), memory(), idempotency.Options{KeyScope: func(*http.Request) string { return "account-1" }})
			send := func(user string) reply {
				req, _ := http.NewRequest(http.MethodPost, s.url+"/orders", strings.NewReader("x"))
				req.Header.Set(idempotency.KeyHeader, "k")
				req.Header.Set("X-User", user)
				return s.do(req)
			}
			first := send("alice")
			expectStatus(t, "alice", first, http.StatusCreated)
			if got := first.header.Get("Set-Cookie"); got != "session=of-alice" {
				t.Fatalf("alice: Set-Cookie %q, want her session", got)
			}
			replay := send("bob")
			expectStatus(t, "bob", replay, http.StatusCreated)
			if replay.body != "run 1" || replay.header.Get(idempotency.ReplayedHeader) != "true" {
				t.Fatalf("bob: %q, replayed %q; want the replay of run 1", replay.body, replay.header.Get(idempotency.ReplayedHeader))
			}
			if got := replay.header.Values("Set-Cookie"); len(got) != 0 {
				t.Fatalf("bob's replay carries Set-Cookie %q", got)
			}
		})
	}
}
