package desttable

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestCanonicalHost: every spelling of a host gives one key; hosts that
// differ, or ports that are not the scheme's default, stay apart.
func TestCanonicalHost(t *testing.T) {
	t.Parallel()
	tests := []struct{ scheme, host, want string }{
		{"http", "api.test", "api.test"},
		{"http", "API.Test", "api.test"},
		{"http", "api.test:80", "api.test"},
		{"HTTP", "api.test:80", "api.test"},
		{"https", "api.test:443", "api.test"},
		{"https", "api.test:80", "api.test:80"},
		{"http", "api.test:443", "api.test:443"},
		{"http", "api.test:8080", "api.test:8080"},
		{"http", "api.test:180", "api.test:180"},
		{"http", "api.test:", "api.test"},
		{"http", "[2001:DB8::1]:8080", "[2001:db8::1]:8080"},
		{"http", "[2001:db8::1]:80", "[2001:db8::1]"},
		{"https", "[::1]:443", "[::1]"},
		{"", "api.test:80", "api.test:80"},
		{"http", "", ""},
		// The root's trailing dot, once.
		{"http", "api.test.", "api.test"},
		{"https", "API.test.:443", "api.test"},
		{"http", "api.test.:8080", "api.test:8080"},
		{"http", "1.2.3.4.", "1.2.3.4"},
		// A port is its decimal number.
		{"http", "api.test:080", "api.test"},
		{"https", "api.test:000443", "api.test"},
		{"http", "api.test:08080", "api.test:8080"},
		{"http", "api.test:0", "api.test:0"},
		{"http", "api.test:000", "api.test:0"},
		{"http", "api.test:x1", "api.test:x1"},
		// An address as net/netip writes it; IPv4, mapped or not, bare.
		{"http", "[2001:db8:0:0:0:0:0:1]:8080", "[2001:db8::1]:8080"},
		{"http", "[2001:0DB8::0001]", "[2001:db8::1]"},
		{"https", "[0:0:0:0:0:0:0:1]:0443", "[::1]"},
		{"http", "[::ffff:1.2.3.4]", "1.2.3.4"},
		{"http", "[::FFFF:102:304]:8080", "1.2.3.4:8080"},
		{"http", "[1.2.3.4]:80", "1.2.3.4"},
		{"http", "[fe80::1%eth0]:8080", "[fe80::1%eth0]:8080"},
		{"http", "[not-an-address]:8080", "[not-an-address]:8080"},
		{"http", "[::1", "[::1"},
	}
	for _, tt := range tests {
		t.Run(tt.scheme+" "+tt.host, func(t *testing.T) {
			t.Parallel()
			if got := CanonicalHost(tt.scheme, tt.host); got != tt.want {
				t.Errorf("CanonicalHost(%q, %q) = %q; want %q", tt.scheme, tt.host, got, tt.want)
			}
		})
	}
}

// TestHostKeyTakesHostWhenTheURLHasNone: a request whose URL has no host
// (a server-side request passed on) is keyed by its Host field.
func TestHostKeyTakesHostWhenTheURLHasNone(t *testing.T) {
	t.Parallel()
	req := &http.Request{URL: &url.URL{Scheme: "http", Path: "/"}, Host: "API.test:80"}
	if got := HostKey(req); got != "api.test" {
		t.Errorf("HostKey = %q; want %q", got, "api.test")
	}
	if got := HostKey(&http.Request{Host: "a.test"}); got != "a.test" {
		t.Errorf("HostKey without a URL = %q; want %q", got, "a.test")
	}
}

// TestCanonicalHostAllocatesNothingWhenCanonical: a host already in its
// canonical form, or with only a default port to drop, costs no
// allocation on the success path.
func TestCanonicalHostAllocatesNothingWhenCanonical(t *testing.T) {
	for _, host := range []string{"api.test", "api.test:443", "[::1]:8080", "[2001:db8::1]", "1.2.3.4:8080", "api.test:8443"} {
		if n := testing.AllocsPerRun(100, func() { CanonicalHost("https", host) }); n != 0 {
			t.Errorf("CanonicalHost(%q): %v allocs; want 0", host, n)
		}
	}
}

// TestTableEvictsAKeyNotUsedLately: a table of 4 with one key
// looked up between every new key keeps that key through 100 others, and
// never holds more than 4.
func TestTableEvictsAKeyNotUsedLately(t *testing.T) {
	t.Parallel()
	var d Table[int]
	hot := d.Get("hot", 4, func(n *int) { *n = 42 })
	for i := range 100 {
		d.Get(fmt.Sprintf("k%d", i), 4, nil)
		if got := d.Get("hot", 4, nil); got != hot {
			t.Fatalf("after %d other keys, hot was forgotten and created afresh", i+1)
		}
		if n := d.Len(); n > 4 {
			t.Fatalf("%d keys held; want at most 4", n)
		}
	}
	if *hot != 42 {
		t.Errorf("hot's state = %d; want 42", *hot)
	}
}

// TestTableGetHostBySpelling: getHost finds a host's state by the
// spelling the last lookup used, and every spelling of one host, in turn
// or after another host, reaches the same state; a host evicted is not
// found through its old spelling.
func TestTableGetHostBySpelling(t *testing.T) {
	var d Table[int]
	get := func(url string) *int {
		req, err := http.NewRequest("GET", url, nil)
		if err != nil {
			t.Fatal(err)
		}
		return d.GetHost(req, 2, nil)
	}
	a := get("http://API.test/x")
	for _, u := range []string{"http://API.test/y", "http://api.test:80/", "HTTP://api.TEST/", "http://API.test/z"} {
		if got := get(u); got != a {
			t.Errorf("%s: another state than http://API.test's", u)
		}
	}
	b := get("https://other.test/")
	if b == a {
		t.Fatal("other.test shares api.test's state")
	}
	if got := get("http://API.test/"); got != a {
		t.Error("api.test after other.test: another state")
	}
	if !raceEnabled {
		req, _ := http.NewRequest("GET", "http://API.test/", nil)
		if n := testing.AllocsPerRun(100, func() { d.GetHost(req, 2, nil) }); n != 0 {
			t.Errorf("a lookup by the last spelling allocates %v times; want 0", n)
		}
	}
	// More hosts than the table holds: api.test is evicted at some point;
	// once it is, its old spelling finds a fresh state, not the old one.
	for _, u := range []string{"http://third.test/", "https://other.test/", "http://fourth.test/", "http://fifth.test/"} {
		get(u)
		if d.Len() > 2 {
			t.Fatalf("%d keys held; want at most 2", d.Len())
		}
	}
	_, held := d.keys.m.Load("api.test")
	if got := get("http://API.test/"); !held && got == a {
		t.Error("api.test, evicted, found through its old spelling")
	}
}

// TestTableGetHostByASpellingSeenBefore: a spelling that is not
// canonical, seen once, finds its destination again without allocating,
// after another spelling was looked up; the spellings remembered are
// bounded, at twice the destinations.
func TestTableGetHostByASpellingSeenBefore(t *testing.T) {
	var d Table[int]
	upper, _ := http.NewRequest("GET", "http://API.test.:080/", nil)
	other, _ := http.NewRequest("GET", "http://api.test/", nil)
	a := d.GetHost(upper, 4, nil)
	if got := d.GetHost(other, 4, nil); got != a {
		t.Fatal("http://api.test/: another state than http://API.test.:080/'s")
	}
	if !raceEnabled {
		n := testing.AllocsPerRun(100, func() {
			d.GetHost(upper, 4, nil)
			d.GetHost(other, 4, nil)
		})
		if n != 0 {
			t.Errorf("lookups by two spellings seen before allocate %v times; want 0", n)
		}
	}
	for i := range 100 {
		req, _ := http.NewRequest("GET", fmt.Sprintf("http://API.test:%05d/", 80+i), nil)
		d.GetHost(req, 4, nil)
		if n := d.spellings.len(); n > 8 {
			t.Fatalf("%d spellings remembered; want at most 8", n)
		}
	}
}

// TestTableEvictionDependsOnLookupsAlone: the key evicted is the
// one CLOCK names, whatever the map's order: with keys a, b, c, d added
// to a table of 4 and b and d looked up, e takes a's place; f takes c's,
// the hand passing b and clearing its mark; g takes e's, the hand passing
// d; h takes b's, whose mark the hand cleared a turn before.
func TestTableEvictionDependsOnLookupsAlone(t *testing.T) {
	t.Parallel()
	for range 20 {
		var d Table[int]
		for _, k := range []string{"a", "b", "c", "d"} {
			d.Get(k, 4, nil)
		}
		d.Get("b", 4, nil)
		d.Get("d", 4, nil)
		for _, step := range []struct {
			add  string
			want []string
		}{
			{"e", []string{"b", "c", "d", "e"}},
			{"f", []string{"b", "d", "e", "f"}},
			{"g", []string{"b", "d", "f", "g"}},
			{"h", []string{"d", "f", "g", "h"}},
		} {
			d.Get(step.add, 4, nil)
			var held []string
			d.keys.m.Range(func(k, _ any) bool { held = append(held, k.(string)); return true })
			slices.Sort(held)
			if !slices.Equal(held, step.want) {
				t.Fatalf("after adding %s: %v held; want %v", step.add, held, step.want)
			}
		}
	}
}

// TestTableBoundLowered: a table whose bound is lowered gives up
// keys until it holds no more than the new bound.
func TestTableBoundLowered(t *testing.T) {
	t.Parallel()
	var d Table[int]
	for i := range 8 {
		d.Get(fmt.Sprint(i), 8, nil)
	}
	d.Get("new", 3, nil)
	if n := d.Len(); n != 3 {
		t.Errorf("%d keys held after the bound went from 8 to 3; want 3", n)
	}
	if _, ok := d.keys.m.Load("new"); !ok {
		t.Error("the key added was not held")
	}
}

// TestTableConcurrentLookupsAndEvictions: lookups and evictions
// from several goroutines at once keep the bound and find one state for
// one key while it is held.
func TestTableConcurrentLookupsAndEvictions(t *testing.T) {
	t.Parallel()
	var d Table[atomic.Int64]
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				req, _ := http.NewRequest("GET", fmt.Sprintf("http://H%d.test:0%d/", (i*7+g)%24, 80+i%2), nil)
				d.GetHost(req, 8, nil).Add(1)
				d.Get(fmt.Sprint(i%5), 8, nil)
			}
		}()
	}
	wg.Wait()
	if n := d.Len(); n > 8 {
		t.Errorf("%d keys held; want at most 8", n)
	}
	if n := d.spellings.len(); n > 16 {
		t.Errorf("%d spellings held; want at most 16", n)
	}
}

// TestTableBoundKeyLength: no host name is longer than 253 bytes;
// a longer name is kept only as its first MaxKeyLen bytes, and its
// spelling is not remembered, so that what a table holds is bounded
// whatever the requests name.
func TestTableBoundKeyLength(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 1000)
	var d Table[int]
	for i, host := range []string{"x" + long, "x" + long + "b", "y" + long} {
		req := httptest.NewRequest("GET", "http://"+host+"/", nil)
		*d.GetHost(req, 0, nil) += i + 1
		if k := HostKey(req); len(k) != MaxKeyLen {
			t.Errorf("HostKey of a %d-byte host: %d bytes; want %d", len(host), len(k), MaxKeyLen)
		}
	}
	if got := d.Len(); got != 2 {
		t.Errorf("%d destinations for two hosts that share their first %d bytes and one that does not; want 2", got, MaxKeyLen)
	}
	if got := *d.GetHost(httptest.NewRequest("GET", "http://x"+long+"/", nil), 0, nil); got != 1+2 {
		t.Errorf("the shared destination holds %d; want 3", got)
	}
	if got := d.spellings.len(); got != 0 {
		t.Errorf("%d spellings of over-long hosts remembered; want 0", got)
	}
}

// TestTableFindNeitherAddsNorMarks: Find returns a held key's state and
// nil for a key never added, adds nothing, and does not keep a key from
// being evicted.
func TestTableFindNeitherAddsNorMarks(t *testing.T) {
	t.Parallel()
	var d Table[int]
	a := d.Get("a", 2, func(n *int) { *n = 7 })
	if got := d.Find("a"); got != a || *got != 7 {
		t.Fatalf("Find(a) = %v; want a's state", got)
	}
	if got := d.Find("b"); got != nil || d.Len() != 1 {
		t.Fatalf("Find(b) = %v with %d keys held; want nil and 1", got, d.Len())
	}
	d.Get("b", 2, nil)
	d.Find("a")
	d.Get("c", 2, nil) // the hand finds a unmarked: only Find read it
	if got := d.Find("a"); got != nil {
		t.Error("a, only found since it was added, is still held; want it evicted")
	}
}

// TestTableGetHostLastSpellingOfAnEvictedKeyFindsAFreshState: the
// spelling looked up last is found again by comparing it alone; once its
// destination was evicted (by a key added by name), that spelling finds a
// fresh state, never the evicted one.
func TestTableGetHostLastSpellingOfAnEvictedKeyFindsAFreshState(t *testing.T) {
	var d Table[int]
	a, _ := http.NewRequest("GET", "http://a.test/", nil)
	first := d.GetHost(a, 1, nil)
	if again := d.GetHost(a, 1, nil); again != first {
		t.Fatal("a.test looked up twice: two states")
	}
	*first = 7
	d.Get("b.test", 1, nil) // a.test is evicted: the table holds one key
	if _, held := d.keys.m.Load("a.test"); held {
		t.Fatal("a.test still held in a table of one after b.test")
	}
	fresh := d.GetHost(a, 1, nil)
	if fresh == first || *fresh != 0 {
		t.Errorf("a.test after its eviction: the evicted state (%d); want a fresh one", *fresh)
	}
}

// TestTableLastHostFindsOnlyTheSpellingFoundLast: LastHost finds nothing
// in an empty table; after GetHost found a spelling, it finds that
// spelling's state (and no other spelling's, even of the same host), and
// nothing once the destination is evicted.
func TestTableLastHostFindsOnlyTheSpellingFoundLast(t *testing.T) {
	var d Table[int]
	req := func(url string) *http.Request {
		r, err := http.NewRequest("GET", url, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, upper, other := req("http://a.test/x"), req("http://A.test/"), req("https://a.test/")
	if got := d.LastHost(a); got != nil {
		t.Fatal("an empty table: LastHost found a state")
	}
	first := d.GetHost(a, 2, nil)
	d.GetHost(a, 2, nil) // found by its spelling: the spelling found last
	if got := d.LastHost(req("http://a.test/y")); got != first {
		t.Errorf("the spelling found last: LastHost found %p; want a.test's %p", got, first)
	}
	for _, r := range []*http.Request{upper, other} {
		if got := d.LastHost(r); got != nil {
			t.Errorf("%s: LastHost found a state; want nil, another spelling", r.URL)
		}
	}
	d.Get("b.test", 1, nil) // a.test is evicted: the table holds one key
	if got := d.LastHost(a); got != nil {
		t.Error("a.test evicted: LastHost found its old state")
	}
}
