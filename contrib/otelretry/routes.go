package otelretry

import (
	"net/http"

	"github.com/httpretry/httpretry/metricsutil"
)

// DefaultMaxRoutes is the number of distinct route values an adapter
// reports when Options.MaxRoutes is 0.
const DefaultMaxRoutes = metricsutil.DefaultMaxRoutes

// routeOf returns the route name of req: route(req) when route is set,
// else the request's host (host[:port], never userinfo).
func routeOf(req *http.Request, route func(*http.Request) string) string {
	if route != nil {
		return route(req)
	}
	return metricsutil.HostRoute(req)
}
