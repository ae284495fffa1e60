package promretry

import (
	"net/http"

	"github.com/httpretry/httpretry/internal/metricsutil"
)

// Defaults and limits of the route label, the same in every adapter.
const (
	// DefaultMaxRoutes is the number of distinct route values a Collector
	// keeps when Options.MaxRoutes is 0.
	DefaultMaxRoutes = metricsutil.DefaultMaxRoutes
	// OtherRoute is the route value of every request whose route is not
	// kept: beyond MaxRoutes, empty, longer than MaxRouteLen bytes or not
	// valid UTF-8. Operations counted here because of MaxRoutes are also
	// counted in httpretry_route_overflows_total.
	OtherRoute = metricsutil.OtherRoute
	// MaxRouteLen is the longest route value kept, in bytes.
	MaxRouteLen = metricsutil.MaxRouteLen
)

// DefaultAttemptBuckets is the last bucket of httpretry_operation_attempts
// when Options.MaxAttempts is 0: buckets 1, 2, …, 10, enough for any
// Transport allowing up to 10 attempts, whatever Transports the Collector
// is later installed on.
const DefaultAttemptBuckets = 10

// routeOf returns the metrics of req's route, and whether its name
// overflowed the cap.
func (c *Collector) routeOf(req *http.Request) (*routeMetrics, bool) {
	return c.routes.Get(c.route(req))
}
