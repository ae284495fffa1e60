package promretry

import (
	"testing"

	"github.com/httpretry/httpretry/internal/metricsutil/labels"
)

// TestMethodIndex: the method label spells any method RFC 9110 and RFC
// 5789 do not define "OTHER".
func TestMethodIndex(t *testing.T) {
	tests := map[string]string{
		"": "GET", "GET": "GET", "HEAD": "HEAD", "POST": "POST", "PUT": "PUT", "DELETE": "DELETE",
		"CONNECT": "CONNECT", "OPTIONS": "OPTIONS", "TRACE": "TRACE", "PATCH": "PATCH",
		"get": "OTHER", "BREW": "OTHER", "PROPFIND": "OTHER", "GET /x": "OTHER",
	}
	for method, want := range tests {
		if got := methodNames[labels.Method(method)]; got != want {
			t.Errorf("method %q labelled %q; want %q", method, got, want)
		}
	}
}
