package httpretry

import (
	"fmt"
	"net/http"
	"net/url"
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
	}
	for _, tt := range tests {
		t.Run(tt.scheme+" "+tt.host, func(t *testing.T) {
			t.Parallel()
			if got := canonicalHost(tt.scheme, tt.host); got != tt.want {
				t.Errorf("canonicalHost(%q, %q) = %q; want %q", tt.scheme, tt.host, got, tt.want)
			}
		})
	}
}

// TestHostKeyTakesHostWhenTheURLHasNone: a request whose URL has no host
// (a server-side request passed on) is keyed by its Host field.
func TestHostKeyTakesHostWhenTheURLHasNone(t *testing.T) {
	t.Parallel()
	req := &http.Request{URL: &url.URL{Scheme: "http", Path: "/"}, Host: "API.test:80"}
	if got := hostKey(req); got != "api.test" {
		t.Errorf("hostKey = %q; want %q", got, "api.test")
	}
	if got := hostKey(&http.Request{Host: "a.test"}); got != "a.test" {
		t.Errorf("hostKey without a URL = %q; want %q", got, "a.test")
	}
}

// TestCanonicalHostAllocatesNothingWhenCanonical: a host already in its
// canonical form, or with only a default port to drop, costs no
// allocation on the success path.
func TestCanonicalHostAllocatesNothingWhenCanonical(t *testing.T) {
	for _, host := range []string{"api.test", "api.test:443", "[::1]:8080"} {
		if n := testing.AllocsPerRun(100, func() { canonicalHost("https", host) }); n != 0 {
			t.Errorf("canonicalHost(%q): %v allocs; want 0", host, n)
		}
	}
}

// TestDestinationsEvictsAKeyNotUsedLately: a table of 4 with one key
// looked up between every new key keeps that key through 100 others, and
// never holds more than 4.
func TestDestinationsEvictsAKeyNotUsedLately(t *testing.T) {
	t.Parallel()
	var d destinations[int]
	hot := d.get("hot", 4, func(n *int) { *n = 42 })
	for i := range 100 {
		d.get(fmt.Sprintf("k%d", i), 4, nil)
		if got := d.get("hot", 4, nil); got != hot {
			t.Fatalf("after %d other keys, hot was forgotten and created afresh", i+1)
		}
		if n := d.len(); n > 4 {
			t.Fatalf("%d keys held; want at most 4", n)
		}
	}
	if *hot != 42 {
		t.Errorf("hot's state = %d; want 42", *hot)
	}
}

// TestDestinationsGetHostBySpelling: getHost finds a host's state by the
// spelling the last lookup used, and every spelling of one host, in turn
// or after another host, reaches the same state; a host evicted is not
// found through its old spelling.
func TestDestinationsGetHostBySpelling(t *testing.T) {
	var d destinations[int]
	get := func(url string) *int {
		req, err := http.NewRequest("GET", url, nil)
		if err != nil {
			t.Fatal(err)
		}
		return d.getHost(req, 2, nil)
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
		if n := testing.AllocsPerRun(100, func() { d.getHost(req, 2, nil) }); n != 0 {
			t.Errorf("a lookup by the last spelling allocates %v times; want 0", n)
		}
	}
	// More hosts than the table holds: api.test is evicted at some point;
	// once it is, its old spelling finds a fresh state, not the old one.
	for _, u := range []string{"http://third.test/", "https://other.test/", "http://fourth.test/", "http://fifth.test/"} {
		get(u)
		if d.len() > 2 {
			t.Fatalf("%d keys held; want at most 2", d.len())
		}
	}
	_, held := d.m.Load("api.test")
	if got := get("http://API.test/"); !held && got == a {
		t.Error("api.test, evicted, found through its old spelling")
	}
}
