package throttle

import (
	"net/http"
	"strings"
	"time"
)

// quotaRoutes is how many routes a destination with several groups of
// quotas remembers the quota of, each under its two keys (see
// routeKeys); a further route takes the place of the oldest.
const quotaRoutes = 64

// quotaRouteTable remembers, for a destination holding named quotas,
// which quota each route's requests draw from, as their
// responses named it: a request on a route known to draw from a spent
// quota is refused as a request to that quota alone would be. A route is
// a request's method and the first two segments of its URL path ("GET
// /search/code"), and, for a route not seen yet, its first segment alone
// ("GET /search"), each hashed (see routeKeys).
type quotaRouteTable struct {
	key    [quotaRoutes]uint64 // 0 for a free entry
	name   [quotaRoutes]string // the quota the route's last response named
	oldest int                 // the entry a new route takes
}

// remember keeps that the route key drew from the quota named name. A
// new route takes the place of the oldest whose quota is not spent
// (spent says which are), or of the oldest when every quota is: the
// routes of a spent quota are the ones that refuse requests, and routes
// that come and go (an ID as the first segment) must not push them out.
func (t *quotaRouteTable) remember(key uint64, name string, spent func(name string) bool) {
	for i := range t.key {
		if t.key[i] == key {
			t.name[i] = name
			return
		}
	}
	at := t.oldest
	for n := range quotaRoutes {
		i := (t.oldest + n) % quotaRoutes
		if t.key[i] == 0 || !spent(t.name[i]) {
			at = i
			break
		}
	}
	t.key[at], t.name[at] = key, name
	if at == t.oldest {
		t.oldest = (t.oldest + 1) % quotaRoutes
	}
}

// lookup returns the name of the quota the route key drew from, when
// known.
func (t *quotaRouteTable) lookup(key uint64) (string, bool) {
	for i := range t.key {
		if t.key[i] == key {
			return t.name[i], true
		}
	}
	return "", false
}

// routeKeys returns the routes of req, hashed (FNV-1a), never 0: its
// method and the first segment of its URL path (wide), and its method
// and the first two segments (narrow). Two resources under one segment
// (GitHub's /search/code and /search/issues draw from two quotas) are
// two narrow routes; a narrow route not seen yet (an ID as its second
// segment) is known by its wide one.
func routeKeys(req *http.Request) (wide, narrow uint64) {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	path := ""
	if req.URL != nil {
		path = strings.TrimPrefix(req.URL.Path, "/")
	}
	first, rest, _ := strings.Cut(path, "/")
	second, _, _ := strings.Cut(rest, "/")
	h := fnv1a(fnv1a(14695981039346656037, method), " /"+first)
	return max(h, 1), max(fnv1a(h, "/"+second), 1)
}

// fnv1a adds s to the FNV-1a hash h.
func fnv1a(h uint64, s string) uint64 {
	for i := range len(s) {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// rememberRoute keeps, when the destination holds several groups or the
// quota was named apart (see mayDrawElsewhere), that req's route drew
// from the quota of slot i, which its response named. q.mu must be held.
func (q *quotaState) rememberRoute(req *http.Request, i int, now time.Time) {
	if req == nil || (q.drawn() != 0 && !q.slots[i].apart.Load()) {
		return // one group, which every request draws from
	}
	if q.routes == nil {
		q.routes = new(quotaRouteTable)
	}
	wide, narrow := routeKeys(req)
	spent := func(name string) bool { return q.spentHeld(name, now) }
	q.routes.remember(narrow, q.slots[i].name, spent)
	q.routes.remember(wide, q.slots[i].name, spent)
}

// spentHeld reports whether the quota named name is held and spent at
// now. q.mu must be held.
func (q *quotaState) spentHeld(name string, now time.Time) bool {
	for i := range q.slots {
		if s := &q.slots[i]; s.name == name {
			u := s.until.Load()
			return u != 0 && holds(u, stamp(now)) && s.left.Load() <= 0
		}
	}
	return false
}

// routeOpens returns when req may draw from the group of the quota its
// route is known to draw from, as v holds it: 0 when that group has
// every quota with requests left or the route is not known.
func (q *quotaState) routeOpens(v *quotaView, req *http.Request) int64 {
	if req == nil {
		return 0
	}
	wide, narrow := routeKeys(req)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.routes == nil {
		return 0
	}
	name, ok := q.routes.lookup(narrow)
	if !ok {
		name, ok = q.routes.lookup(wide)
	}
	if !ok {
		return 0
	}
	for i := range q.slots {
		if v.held&(1<<i) != 0 && q.slots[i].name == name {
			return v.opens(i)
		}
	}
	return 0
}

// mayDrawElsewhere reports whether req, refused by the quotas held, may
// draw from a quota its destination has not announced yet: every quota
// held was named apart (see namedApart: the server meters its routes
// apart, as GitHub's X-RateLimit-Resource and Discord's
// X-RateLimit-Bucket say) and req's route is not known to draw from any.
// Such a request is sent: its answer names its quota, and its route is
// then known. A request while another quota is held (unnamed, or a
// RateLimit policy's), or of no known route (req nil), is refused.
func (q *quotaState) mayDrawElsewhere(req *http.Request) bool {
	if req == nil {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := range q.slots {
		if s := &q.slots[i]; s.until.Load() != 0 && (s.name == "" || !s.apart.Load()) {
			return false
		}
	}
	if q.routes == nil {
		return true
	}
	wide, narrow := routeKeys(req)
	_, known := q.routes.lookup(narrow)
	if !known {
		_, known = q.routes.lookup(wide)
	}
	return !known
}
