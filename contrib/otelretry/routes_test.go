package otelretry

import (
	"net/http"
	"testing"
)

// The route table itself is tested in metricsutil.

func TestRouteOf(t *testing.T) {
	req, _ := http.NewRequest("GET", "http://user:pw@api.test:8080/books/1?q=1", nil)
	if got := routeOf(req, nil); got != "api.test" {
		t.Errorf("default route = %q; want the host without its port", got)
	}
	if got := routeOf(req, func(*http.Request) string { return "/books/{id}" }); got != "/books/{id}" {
		t.Errorf("route = %q", got)
	}
	req.URL.Host = ""
	req.Host = "h.test:8080"
	if got := routeOf(req, nil); got != "h.test" {
		t.Errorf("route without URL host = %q; want Request.Host", got)
	}
}
