package httpretry

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
)

// TestQuotaPerCredentialWithAKeyThatNamesIt: an API whose quota is per
// token (GitHub: 5,000 an hour per token), called by one process with
// two tokens. With a Key naming the host and a hash of the
// Authorization header, as docs/overload.md says, alice's spent quota
// refuses alice's next call and not bob's; the Key never holds the token
// itself.
func TestQuotaPerCredentialWithAKeyThatNamesIt(t *testing.T) {
	t.Parallel()
	reset := strconv.FormatInt(time.Now().Add(50*time.Minute).Unix(), 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		remaining := "4997"
		if r.Header.Get("Authorization") == "Bearer alice" {
			remaining = "0"
		}
		w.Header().Set("X-Ratelimit-Limit", "5000")
		w.Header().Set("X-Ratelimit-Remaining", remaining)
		w.Header().Set("X-Ratelimit-Reset", reset)
		w.Header().Set("X-Ratelimit-Resource", "core")
	}))
	defer srv.Close()
	var mu sync.Mutex
	var keys []string
	th := drawing(&throttle.Throttle{Key: func(req *http.Request) string {
		sum := sha256.Sum256([]byte(req.Header.Get("Authorization")))
		k := req.URL.Host + " " + hex.EncodeToString(sum[:8])
		mu.Lock()
		keys = append(keys, k)
		mu.Unlock()
		return k
	}}, func() float64 { return 1 })
	client := &http.Client{Transport: &Transport{Base: srv.Client().Transport, MaxAttempts: 1, Throttle: th}}
	aliceSpentBobNot(t, client, srv.URL+"/user")
	for _, k := range keys {
		if len(k) > 64 || containsToken(k) {
			t.Errorf("key %q: want a short name without the token", k)
		}
	}
}

// aliceSpentBobNot calls url as alice and bob once each (both sent), then
// again: alice's call, her quota spent, is refused locally with
// ErrQuotaExhausted, and bob's (4,997 left) is sent.
func aliceSpentBobNot(t *testing.T, client *http.Client, url string) {
	t.Helper()
	get := func(token string) error {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for _, tok := range []string{"alice", "bob"} {
		if err := get(tok); err != nil {
			t.Fatalf("%s's first call: %v", tok, err)
		}
	}
	if err := get("alice"); !errors.Is(err, throttle.ErrQuotaExhausted) {
		t.Errorf("alice's call with her quota spent: %v; want ErrQuotaExhausted", err)
	}
	if err := get("bob"); err != nil {
		t.Errorf("bob's call with 4,997 left: %v; want it sent", err)
	}
}

// containsToken reports whether k holds a token of the test, or its
// scheme.
func containsToken(k string) bool {
	for _, tok := range []string{"alice", "bob", "Bearer"} {
		if strings.Contains(k, tok) {
			return true
		}
	}
	return false
}

// TestQuotaOfOneCredentialDoesNotRefuseAnother: the same API with the
// Throttle's defaults, no Key. Alice's spent token refuses alice's next
// call, locally, and not bob's (4,997 left): quotas are kept per
// credential. The server sees alice once and bob twice.
func TestQuotaOfOneCredentialDoesNotRefuseAnother(t *testing.T) {
	t.Parallel()
	reset := strconv.FormatInt(time.Now().Add(50*time.Minute).Unix(), 10)
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		remaining := "4997"
		mu.Lock()
		seen[r.Header.Get("Authorization")]++
		mu.Unlock()
		if r.Header.Get("Authorization") == "Bearer alice" {
			remaining = "0"
		}
		w.Header().Set("X-Ratelimit-Limit", "5000")
		w.Header().Set("X-Ratelimit-Remaining", remaining)
		w.Header().Set("X-Ratelimit-Reset", reset)
		w.Header().Set("X-Ratelimit-Resource", "core")
	}))
	defer srv.Close()
	client := &http.Client{Transport: &Transport{Base: srv.Client().Transport, MaxAttempts: 1,
		Throttle: drawing(&throttle.Throttle{}, func() float64 { return 1 })}}
	aliceSpentBobNot(t, client, srv.URL+"/user")
	mu.Lock()
	defer mu.Unlock()
	if seen["Bearer alice"] != 1 || seen["Bearer bob"] != 2 {
		t.Errorf("server saw alice %d and bob %d times; want 1 and 2", seen["Bearer alice"], seen["Bearer bob"])
	}
}
