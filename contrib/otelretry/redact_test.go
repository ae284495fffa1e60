package otelretry

import (
	"net/url"
	"strings"
	"testing"
)

// TestURLFullCarriesNoSecret: url.full keeps the scheme, host, path and
// the names of query parameters as sent, in their order, and never a
// query value, userinfo or fragment, however the URL spells them: a
// parameter without a name (a bare token, "?abc123") is a value too, and
// a parameter that does not parse is still redacted, not dropped.
func TestURLFullCarriesNoSecret(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, url, want string
	}{
		{"values", "http://api.test/a?token=s3cr3t&page=2", "http://api.test/a?token=REDACTED&page=REDACTED"},
		{"bare token", "http://api.test/a?s3cr3t", "http://api.test/a?REDACTED"},
		{"bare token among values", "http://api.test/a?page=2&s3cr3t", "http://api.test/a?page=REDACTED&REDACTED"},
		{"escaped bare token", "http://api.test/a?s3cr3t%3D%3D", "http://api.test/a?REDACTED"},
		{"semicolon", "http://api.test/a?page=2;token=s3cr3t", "http://api.test/a?page=REDACTED"},
		{"bad escape", "http://api.test/a?token=s3cr3t%zz", "http://api.test/a?token=REDACTED"},
		{"empty value", "http://api.test/a?debug=&x", "http://api.test/a?debug=REDACTED&REDACTED"},
		{"user only", "http://s3cr3t@api.test/a", "http://REDACTED:REDACTED@api.test/a"},
		{"user and password", "https://u:s3cr3t@api.test:8443/a", "https://REDACTED:REDACTED@api.test:8443/a"},
		{"fragment", "http://api.test/a#access_token=s3cr3t", "http://api.test/a"},
		{"query in fragment", "http://api.test/a?x=1#s3cr3t?y=2", "http://api.test/a?x=REDACTED"},
		{"no query", "http://api.test/a/b", "http://api.test/a/b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := url.Parse(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			got := redactedURL(u)
			if got != tt.want {
				t.Errorf("redactedURL(%q) = %q; want %q", tt.url, got, tt.want)
			}
			if strings.Contains(got, "s3cr3t") {
				t.Errorf("redactedURL(%q) = %q: the secret is in url.full", tt.url, got)
			}
		})
	}
}
