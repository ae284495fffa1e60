package throttle

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry/internal/desttable"
	"github.com/jonboulle/clockwork"
)

// destSpellings are the ways a request may write host i: as it is, in
// upper case, with a trailing dot, with the scheme's default port.
func destSpellings(i int) []string {
	h := fmt.Sprintf("h%d.test", i)
	return []string{h, strings.ToUpper(h), h + ".", h + ":443"}
}

// destCredentials are the credentials a request may carry: none, two
// tokens, an API key.
var destCredentials = []http.Header{
	{},
	{"Authorization": {"Bearer a"}},
	{"Authorization": {"Bearer b"}},
	{"X-Api-Key": {"k"}},
}

// TestDestIsAlwaysTheStateOfItsOwnHostAndCredential: 8 goroutines look
// up 48 hosts, each spelled four ways, with four credentials (none, two
// tokens, an API key), in a throttle that keeps 16 destinations, so that
// evictions run all along; keyed by host, by a Key function, and with a
// Shared. A state returned is only ever returned for one destination
// and one credential: never another host's, never another credential's,
// whichever way the host is spelled and whichever lookup (the spelling
// found last, the spellings' table, the full lookup) finds it; a
// credential's state belongs to a state of its own host; and with a
// Shared, the state is shared under its host's canonical key.
func TestDestIsAlwaysTheStateOfItsOwnHostAndCredential(t *testing.T) {
	t.Parallel()
	const hosts, maxKeys, workers, lookups = 48, 16, 8, 3000
	for _, mode := range []string{"host", "Key", "Shared"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			th := &Throttle{MaxKeys: maxKeys}
			switch mode {
			case "Key":
				th.Key = func(r *http.Request) string { return desttable.HostKey(r) }
			case "Shared":
				th.Shared = &fleetCounts{}
			}
			var owner sync.Map // *Dest -> "host|credential"
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(w), 1))
					for range lookups {
						i := rng.IntN(hosts)
						sp := destSpellings(i)[rng.IntN(4)]
						c := rng.IntN(len(destCredentials))
						req := &http.Request{Method: http.MethodGet, URL: mustURL("https://" + sp + "/"), Header: destCredentials[c].Clone()}
						if c == 0 && rng.IntN(2) == 0 {
							req.Header = nil
						}
						d := th.Dest(req)
						for range rng.IntN(3) { // again: the spelling found last, unless another came between
							d = th.Dest(req)
						}
						want := fmt.Sprintf("h%d.test|%d", i, c)
						if got, _ := owner.LoadOrStore(d, want); got != want {
							t.Errorf("the state of %s (credential %d) was returned before for %s", sp, c, got)
							return
						}
						host := d
						if d.host != nil {
							host = d.host
						}
						if c == 0 && d.host != nil || c != 0 && d.host == nil {
							t.Errorf("the state of %s with credential %d: host state %p; want one only for a credential", sp, c, d.host)
							return
						}
						hw := fmt.Sprintf("h%d.test|0", i)
						if got, _ := owner.LoadOrStore(host, hw); got != hw {
							t.Errorf("the state of %s (credential %d) belongs to a host state returned for %s", sp, c, got)
							return
						}
						if mode == "Shared" {
							if k := th.shareKey(d); k != fmt.Sprintf("h%d.test", i) {
								t.Errorf("the state of %s is shared under %q; want h%d.test", sp, k, i)
								return
							}
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// TestDestAfterEvictionIsFresh: a destination announces a quota (not
// spent, so its state is not pinned), and is looked up last by its
// spelling; lookups of three times as many other hosts as the throttle
// keeps (by long names too, which the spellings' table does not
// remember) evict it. Looked up again, by the same spelling (the one found last, when
// only long names came between) or another, it is a fresh state: no
// quota known, not the state it had.
func TestDestAfterEvictionIsFresh(t *testing.T) {
	t.Parallel()
	const maxKeys = 4
	for _, between := range []string{"short names", "long names"} {
		for _, again := range []string{"api.test", "API.test"} {
			t.Run(between+", again as "+again, func(t *testing.T) {
				t.Parallel()
				fc := clockwork.NewFakeClock()
				th := &Throttle{MaxKeys: maxKeys}
				req := &http.Request{Method: http.MethodGet, URL: mustURL("https://api.test/"), Header: http.Header{}}
				old := th.Dest(req)
				th.Record(old, &Result{Status: 200, Sent: fc.Now(), Header: http.Header{
					"X-Ratelimit-Limit": {"100"}, "X-Ratelimit-Remaining": {"90"}, "X-Ratelimit-Reset": {fmt.Sprint(fc.Now().Add(time.Hour).Unix())}}}, fc)
				if !old.QuotaKnown() || th.Dest(req) != old {
					t.Fatal("the destination's quota is not known before its eviction")
				}
				for i := range 3 * maxKeys { // past the second chance CLOCK gives a key used
					name := fmt.Sprintf("other%d.test", i)
					if between == "long names" {
						name += "." + strings.Repeat("x", 320)
					}
					th.Dest(&http.Request{Method: http.MethodGet, URL: mustURL("https://" + name + "/")})
				}
				d := th.Dest(&http.Request{Method: http.MethodGet, URL: mustURL("https://" + again + "/"), Header: http.Header{}})
				if d == old || d.QuotaKnown() {
					t.Errorf("the state after eviction: the old one %v, quota known %v; want a fresh state", d == old, d.QuotaKnown())
				}
			})
		}
	}
}

// mustURL parses a URL the test writes.
func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}
