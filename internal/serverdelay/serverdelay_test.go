package serverdelay

import (
	"net/http"
	"net/textproto"
	"testing"
)

// TestNamesAreCanonical: every name is net/http's canonical spelling, so
// that indexing a received header map with it finds the header.
func TestNamesAreCanonical(t *testing.T) {
	t.Parallel()
	for _, name := range append(Millisecond[:], RetryAfter) {
		if got := textproto.CanonicalMIMEHeaderKey(name); got != name {
			t.Errorf("%q is not canonical; net/http spells it %q", name, got)
		}
	}
}

// TestPresent: any of the headers, valid or not and in any case as
// net/http receives it, is a server's delay; none, or an empty list, is
// not.
func TestPresent(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		header map[string]string // added with Header.Add, which canonicalizes
		want   bool
	}{
		{"none", nil, false},
		{"unrelated", map[string]string{"Content-Type": "text/plain"}, false},
		{"Retry-After", map[string]string{"retry-after": "1"}, true},
		{"Retry-After-Ms", map[string]string{"retry-after-ms": "500"}, true},
		{"X-Amz-Retry-After", map[string]string{"x-amz-retry-after": "500"}, true},
		{"malformed still counts", map[string]string{"X-AMZ-RETRY-AFTER": "soon"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			for k, v := range tt.header {
				h.Add(k, v)
			}
			if got := Present(h); got != tt.want {
				t.Errorf("Present(%v) = %v; want %v", h, got, tt.want)
			}
		})
	}
	if Present(http.Header{"Retry-After": {}}) {
		t.Error("Present with an empty Retry-After list = true; want false")
	}
}
