package throttle

import (
	"net/http"
	"slices"
	"time"
)

// apfLevelsHeld is how many priority levels a destination keeps a pause
// for; a further one takes the place of the one whose pause ends first.
const apfLevelsHeld = 8

// apfLevels is what a Kubernetes API server's answers said of its API
// Priority and Fairness levels: which priority level each route's last
// answer named (X-Kubernetes-PF-PriorityLevel-UID, on every answer APF
// handled), and the levels paused by a 429 with Retry-After. A 429 of
// APF says that one level is saturated, not the server: it pauses the
// routes whose last answer named that level, until its Retry-After;
// requests on routes whose answers named another level, or none yet (a
// controller's lease renewal not sent since), still go. A route is a
// request's method and the first two segments of its path, as for
// quotas (see routeKeys), its narrow key alone: a route not seen goes.
// quotaState.mu protects it.
type apfLevels struct {
	routes quotaRouteTable // route → the level its last answer named
	name   [apfLevelsHeld]string
	until  [apfLevelsHeld]int64 // the level's pause ends, in stamp nanoseconds; 0 for none
}

// observeLevel keeps that r's route was answered by the priority level
// named level, and pauses the level for a 429's Retry-After. q.mu must
// be held.
func (q *quotaState) observeLevel(r *Result, level string, now time.Time) {
	level = quotaName(level)
	if level == "" {
		return
	}
	if q.levels == nil {
		q.levels = new(apfLevels)
	}
	l := q.levels
	if r.Request != nil {
		_, narrow := routeKeys(r.Request)
		l.routes.remember(narrow, level, func(name string) bool { return l.opens(name, stamp(now)) != 0 })
	}
	if r.Status != http.StatusTooManyRequests || !r.HasRetryAfter {
		return
	}
	until := stamp(now.Add(min(r.RetryAfter, maxRateLimitReset)))
	l.pause(level, until)
	q.known(now)
	storeMax(&q.levelUntil, until)
	storeMax(&q.until, until)
}

// pause pauses the level named name until until: in its own place, a
// free one, or the one whose pause ends first.
func (l *apfLevels) pause(name string, until int64) {
	at := slices.Index(l.name[:], name)
	if at < 0 {
		at = slices.Index(l.until[:], slices.Min(l.until[:]))
		l.name[at], l.until[at] = name, 0
	}
	l.until[at] = max(l.until[at], until)
}

// opens returns when the level named name may be sent to again, at now:
// 0 when it is not paused.
func (l *apfLevels) opens(name string, now int64) int64 {
	for i := range l.name {
		if l.name[i] == name && holds(l.until[i], now) {
			return l.until[i]
		}
	}
	return 0
}

// levelOpens returns when req may be sent, at now, given the priority
// level its route's last answer named: 0 when that level is not paused,
// or the route's level is not known.
func (q *quotaState) levelOpens(req *http.Request, now time.Time) int64 {
	_, narrow := routeKeys(req)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.levels == nil {
		return 0
	}
	level, ok := q.levels.routes.lookup(narrow)
	if !ok {
		return 0
	}
	return q.levels.opens(level, stamp(now))
}
