package overload

import (
	"net/http"
	"testing"
)

// TestResponseSignalsOverload: 429, 503, 529, a proxy's 502 or 504 and
// a 5xx whose server said "X-Should-Retry: false" signal overload; other
// 5xx and 4xx do not.
func TestResponseSignalsOverload(t *testing.T) {
	tests := []struct {
		status int
		retry  string
		want   bool
	}{
		{200, "", false}, {404, "", false}, {429, "", true}, {500, "", false}, {502, "", true}, {504, "", true}, {504, "true", false},
		{503, "", true}, {529, "", true}, {500, " False ", true}, {502, "true", false}, {404, "false", false},
	}
	for _, tt := range tests {
		resp := &http.Response{StatusCode: tt.status, Header: http.Header{}}
		if tt.retry != "" {
			resp.Header.Set("X-Should-Retry", tt.retry)
		}
		if got := Response(resp); got != tt.want {
			t.Errorf("%d %q: %v, want %v", tt.status, tt.retry, got, tt.want)
		}
	}
}

// TestServedStatusesSignalNoOverload: a 1xx, 2xx or 3xx is served and
// signals no overload whatever its header carries (Envoy's overload
// headers, "X-Should-Retry: false"); a 400 is no longer served.
func TestServedStatusesSignalNoOverload(t *testing.T) {
	h := http.Header{"X-Envoy-Overloaded": {"true"}, "X-Envoy-Ratelimited": {"true"}, "X-Should-Retry": {"false"}}
	for st := 100; st < 400; st++ {
		if !Served(st) || Response(&http.Response{StatusCode: st, Header: h}) {
			t.Errorf("status %d: served %v, overload %v; want served, no overload", st, Served(st), Response(&http.Response{StatusCode: st, Header: h}))
		}
	}
	if Served(400) {
		t.Error("status 400: served; want not")
	}
}
