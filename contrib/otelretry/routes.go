package otelretry

import (
	"net/http"
	"net/url"

	"github.com/httpretry/httpretry/internal/metricsutil"
)

// DefaultMaxRoutes is the number of distinct route values an adapter
// reports when Options.MaxRoutes is 0.
const DefaultMaxRoutes = metricsutil.DefaultMaxRoutes

// routeOf returns the route name of req: route(req) when route is set,
// else the request's host without its port (never userinfo), as the HTTP
// semantic conventions' server.address is, and as the operation span
// carries it.
func routeOf(req *http.Request, route func(*http.Request) string) string {
	if route != nil {
		return route(req)
	}
	u := url.URL{Host: metricsutil.HostRoute(req)}
	return u.Hostname()
}
