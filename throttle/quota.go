package throttle

import (
	"cmp"
	"math"
	"math/bits"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrQuotaExhausted matches (with [errors.Is]) the error of an operation
// that a [Throttle] refused because its destination said its quota was
// spent (see [ParseRateLimit]) and the quota has not reset yet. It also
// matches [ErrThrottled].
var ErrQuotaExhausted error = quotaExhaustedError{}

type quotaExhaustedError struct{}

func (quotaExhaustedError) Error() string {
	return "throttle: refused locally: the destination's rate-limit quota is spent"
}

// Is makes ErrQuotaExhausted match ErrThrottled.
func (quotaExhaustedError) Is(target error) bool { return target == ErrThrottled }

// maxQuotaNames is how many named quotas a destination keeps; a further
// name takes the place of the one that resets first among those not
// spent (of spent ones only when all are).
const maxQuotaNames = 4

// quotaMisses is how many responses in a row without rate-limit fields
// a destination holding no quota is read for; past them only its 429s
// are, and a sample of the others (see sample).
const quotaMisses = 16

// quotaState is what a destination last said of its quotas, one slot per
// quota name (X-RateLimit-Resource, or a RateLimit policy's name; "" for
// an unnamed quota). Every 429 is read, and, while a quota is held, every
// response; with none held, each response until quotaMisses in a row
// had no rate-limit fields. A destination that sends none then costs two
// atomic loads per request and no header look-up; one that sends fields
// on some routes only (a 404 from a route the gateway does not meter) is
// still read, and a response without fields stops nothing while a quota
// is held.
//
// The quotas one response announces together all apply to the request it
// answered: they form a group, and a request drawing from the group is
// refused while any one of them is spent. Quotas announced apart (GitHub's
// core and search, named by X-RateLimit-Resource) are groups of their
// own. Which group a request draws from is known only from its response:
// an operation is refused only when every group held has a spent quota,
// or its route is known to draw from a spent one; with quotas named
// apart only (see namedApart), a route not known to draw from any is
// sent (see mayDrawElsewhere).
// When every quota held is in one group, each operation admitted takes
// one from each's count; with several groups, from none.
type quotaState struct {
	misses atomic.Int32 // responses read in a row without rate-limit fields, up to quotaMisses; see wants
	until  atomic.Int64 // nonzero while a quota may be held: the latest reset set, in stamp nanoseconds (see stamp)
	paused atomic.Int64 // every request is refused before it, in stamp nanoseconds (see stamp); see pausesDestination
	// knownAt is when a response first made a quota known, in Unix
	// nanoseconds, 0 before: an attempt that did not read the clock
	// (see quotaUpdate) was sent before it.
	knownAt atomic.Int64

	// releasing is set while the operations held for a pause are
	// released one at a time (see release).
	releasing atomic.Bool
	// pin is when the quota was last found refusing requests (spent, or
	// its destination paused), in stamp nanoseconds; 0 once found open
	// again. See destPinned.
	pin atomic.Int64
	// levelUntil is the latest end of a priority level's pause (see
	// apfLevels), in stamp nanoseconds; 0 before any.
	levelUntil atomic.Int64

	mu     sync.Mutex // protects the slots' names, their assignment and renewal, routes, and rel
	slots  [maxQuotaNames]quotaSlot
	routes *quotaRouteTable // made once several groups are held; see rememberRoute
	rel    release
	// releases counts the releases started, numbering them (see
	// release.gen).
	releases uint64
	levels   *apfLevels // made at the first answer naming a priority level
}

// quotaSlot is one quota of a destination.
type quotaSlot struct {
	name      string        // protected by quotaState.mu
	until     atomic.Int64  // when the window resets, in stamp nanoseconds (see stamp); 0 when none is held
	left      atomic.Int64  // requests the window admits before until
	low       atomic.Int64  // the least count a response announced in the window: the server's count
	limit     atomic.Int64  // requests a window admits, announced or the most seen; 0 when not known
	period    atomic.Int64  // a window's length in nanoseconds, announced or the longest reset seen; 0 when not known
	inflight  atomic.Int64  // operations admitted from left whose response has not been read
	group     atomic.Uint32 // the slots last announced with this one, itself included, one bit each
	announced atomic.Bool   // a response announced this quota since its window began
	sized     atomic.Bool   // limit was announced, not taken from the most seen
	apart     atomic.Bool   // named by a field that names the one quota a request counted against (see namedApart)
}

// quotaSame is how far apart two announced resets may be and still name
// the same window: the server counts whole seconds.
const quotaSame = time.Second

// admit takes one request from the known quota. It returns the reset
// time and false when the quota is spent.
func (q *quotaState) admit(now time.Time) (time.Time, bool) {
	reset, ok, _ := q.check(now, true, nil)
	return reset, ok
}

// taken is what a look at the quota took for an attempt, to be given
// back with refund if the attempt is then not sent: a request from each
// quota held (counted), and the turn of a release (turn: the release's
// generation, 0 for none).
type taken struct {
	counted bool
	turn    uint64
}

// take is admit for an attempt of req about to be sent, reporting too
// whether a request was counted, to be given back if the attempt is then
// not sent (see refund). With several groups held, req's route may say
// which it draws from (see quotaRouteTable); req may be nil.
func (q *quotaState) take(now time.Time, req *http.Request) (reset time.Time, ok bool, tk taken) {
	return q.check(now, true, req)
}

// spent reports whether the known quota is spent at now, and its reset,
// without taking a request from it.
func (q *quotaState) spent(now time.Time) (time.Time, bool) {
	reset, ok, _ := q.check(now, false, nil)
	return reset, !ok
}

// spentNamed reports whether the group of the quota named name has a
// spent quota at now, and when the group opens again; held is false when
// no such quota is held.
func (q *quotaState) spentNamed(name string, now time.Time) (reset time.Time, spent, held bool) {
	if p := q.paused.Load(); holds(p, stamp(now)) {
		return instant(p), true, true
	}
	i := -1
	q.mu.Lock()
	for j := range q.slots {
		if q.slots[j].name == name && q.slots[j].until.Load() != 0 {
			i = j
		}
	}
	q.mu.Unlock()
	if i < 0 {
		return time.Time{}, false, false
	}
	v := q.view(now)
	if v.held&(1<<i) == 0 {
		return time.Time{}, false, false
	}
	opens := v.opens(i)
	return instant(opens), opens != 0, true
}

// refund gives back what tk took for an attempt that was then not sent:
// the release's turn, if the release it took it from is still under way,
// and the requests counted.
func (q *quotaState) refund(tk taken) {
	if tk.turn != 0 {
		q.returnTurn(tk.turn)
	}
	if tk.counted {
		q.giveBack()
	}
}

// giveBack gives back to the quotas held a request counted for an
// attempt that is not sent.
func (q *quotaState) giveBack() {
	drawn := q.drawn()
	for i := range q.slots {
		if s := &q.slots[i]; drawn&(1<<i) != 0 {
			s.left.Add(1)
			decrementIfPositive(&s.inflight)
		}
	}
}

// unanswered ends the count of a request in flight that got no response,
// or one that said nothing of the quota (observe ends those that did),
// so that later responses are taken at their word again.
func (q *quotaState) unanswered() {
	drawn := q.drawn()
	for i := range q.slots {
		if drawn&(1<<i) != 0 {
			decrementIfPositive(&q.slots[i].inflight)
		}
	}
}

// drawn returns the slots every request draws from, as held now, without
// renewing any.
func (q *quotaState) drawn() uint32 {
	var v quotaView
	for i := range q.slots {
		if s := &q.slots[i]; s.until.Load() != 0 {
			v.held |= 1 << i
			v.group[i] = s.group.Load()
		}
	}
	return v.drawn()
}

// check is admit, which takes a request when take is set, and spent; it
// reports what it took. req, when not nil, is the request to admit.
func (q *quotaState) check(now time.Time, take bool, req *http.Request) (time.Time, bool, taken) {
	u := q.until.Load()
	if u == 0 {
		return time.Time{}, true, taken{}
	}
	if at := q.pausedUntil(now, req); at != 0 {
		return instant(at), false, taken{}
	}
	if !q.releasing.Load() {
		reset, ok, counted := q.checkHeld(u, now, take, req)
		if !ok || !take || !q.releasing.Load() {
			return reset, ok, taken{counted: counted}
		}
		// A spent window ended with this look (see current), or with
		// another caller's at the same instant: the release lets one
		// operation go, and holds the others.
		mine, turn := q.releaseOne(true)
		if !mine {
			if counted {
				q.giveBack()
			}
			return now, false, taken{}
		}
		return reset, ok, taken{counted: counted, turn: turn}
	}
	ok, turn := q.releaseOne(take)
	if !ok {
		return now, false, taken{}
	}
	reset, ok, counted := q.checkHeld(u, now, take, req)
	if !ok {
		if turn != 0 {
			q.returnTurn(turn)
		}
		return reset, false, taken{counted: counted}
	}
	return reset, ok, taken{counted: counted, turn: turn}
}

// pausedUntil returns when a request of req (nil when not known) may go
// at now, given the destination's pause and, for req's route, its
// priority level's: 0 when neither holds it. A pause found ended starts
// a release (see endPause).
func (q *quotaState) pausedUntil(now time.Time, req *http.Request) int64 {
	if p := q.paused.Load(); p != 0 {
		if holds(p, stamp(now)) {
			return p
		}
		q.endPause(p)
	}
	if req != nil && holds(q.levelUntil.Load(), stamp(now)) {
		return q.levelOpens(req, now)
	}
	return 0
}

// checkHeld is check's work on the quotas held, past a pause and a
// release; u is q.until as check read it.
func (q *quotaState) checkHeld(u int64, now time.Time, take bool, req *http.Request) (time.Time, bool, bool) {
	v := q.view(now)
	if v.held == 0 {
		// Every window has reset with nothing to renew: admit until a
		// response says more.
		if !q.releasing.Load() && !holds(q.levelUntil.Load(), stamp(now)) {
			q.until.CompareAndSwap(u, 0)
		}
		return time.Time{}, true, false
	}
	drawn := v.drawn()
	if take && drawn != 0 {
		reset, ok, counted := q.takeFrom(drawn)
		if !ok && q.mayDrawElsewhere(req) {
			return time.Time{}, true, false
		}
		return reset, ok, counted
	}
	if drawn == 0 && req != nil {
		// Several groups: req's route may say which it draws from.
		if at := q.routeOpens(&v, req); at != 0 {
			return instant(at), false, false
		}
	}
	reset, ok := v.open()
	if !ok && q.mayDrawElsewhere(req) {
		return time.Time{}, true, false
	}
	return instant(reset), ok, false
}

// view returns the quotas held at now, renewing those whose window has
// reset (see current).
func (q *quotaState) view(now time.Time) quotaView {
	var v quotaView
	for i := range q.slots {
		s := &q.slots[i]
		until, ok := q.current(s, now)
		if !ok {
			continue
		}
		v.held |= 1 << i
		v.until[i] = stamp(until)
		v.left[i] = s.left.Load()
		v.group[i] = s.group.Load()
	}
	return v
}

// takeFrom takes one request from each quota in drawn. When one is spent
// it takes from none, and returns the latest reset of the spent ones.
func (q *quotaState) takeFrom(drawn uint32) (reset time.Time, ok, counted bool) {
	var taken uint32
	var spent int64
	for i := range q.slots {
		s := &q.slots[i]
		if drawn&(1<<i) == 0 {
			continue
		}
		if s.left.Add(-1) < 0 {
			s.left.Add(1)
			spent = max(spent, s.until.Load())
			continue
		}
		taken |= 1 << i
	}
	for i := range q.slots {
		if taken&(1<<i) == 0 {
			continue
		}
		if spent != 0 {
			q.slots[i].left.Add(1)
		} else {
			q.slots[i].inflight.Add(1)
		}
	}
	if spent != 0 {
		return instant(spent), false, false
	}
	return time.Time{}, true, taken != 0
}

// quotaView is the quotas of a destination held at one time: a slot's
// bit in held, and its reset, count and group.
type quotaView struct {
	held  uint32
	until [maxQuotaNames]int64
	left  [maxQuotaNames]int64
	group [maxQuotaNames]uint32
}

// groupOf returns the quotas held in slot i's group.
func (v *quotaView) groupOf(i int) uint32 {
	return (v.group[i] | 1<<i) & v.held
}

// opens returns when a request may draw from slot i's group: 0 when every
// quota held in it has requests left, else the latest reset of its spent
// ones.
func (v *quotaView) opens(i int) int64 {
	var at int64
	g := v.groupOf(i)
	for j := range maxQuotaNames {
		if g&(1<<j) != 0 && v.left[j] <= 0 {
			at = max(at, v.until[j])
		}
	}
	return at
}

// open reports whether a request may go: some group held has every quota
// with requests left. Else it returns when the first group opens. v
// holds at least one quota.
func (v *quotaView) open() (int64, bool) {
	first := int64(math.MaxInt64)
	for i := range maxQuotaNames {
		if v.held&(1<<i) == 0 {
			continue
		}
		at := v.opens(i)
		if at == 0 {
			return 0, true
		}
		first = min(first, at)
	}
	return first, false
}

// drawn returns the quotas every request draws from: all those held when
// they form one group, else none, since which group a request draws from
// is known only from its response.
func (v *quotaView) drawn() uint32 {
	for i := range maxQuotaNames {
		if v.held&(1<<i) != 0 && v.groupOf(i) != v.held {
			return 0
		}
	}
	return v.held
}

// current returns the reset of s's window at now, and whether s holds a
// quota. A window that has reset is renewed with the quota's limit when
// the window's length is known (its limit is then known too: both are
// learned from a window's count, see update) and a response announced
// the quota during the window that ended, so that the callers waiting
// for the reset are admitted up to the quota, not all at once before any
// response says what the new window holds; a quota no response
// announced for a whole window is dropped, as one the destination no
// longer meters.
func (q *quotaState) current(s *quotaSlot, now time.Time) (time.Time, bool) {
	if u, ended := s.window(now); !ended {
		return heldUntil(u)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	u, ended := s.window(now)
	if !ended { // renewed or replaced meanwhile
		return heldUntil(u)
	}
	limit, period := s.limit.Load(), s.period.Load()
	if !s.announced.Load() || period <= 0 {
		if s.announced.Load() && s.left.Load() <= 0 && !q.releasing.Load() {
			// Announced spent, and the new window's count not known:
			// the operations held for it are let go one at a time.
			q.startRelease()
		}
		s.until.Store(0)
		return time.Time{}, false
	}
	next := renewedReset(u, stamp(now), period)
	// left before until: whoever sees the new window sees its count.
	s.left.Store(limit)
	s.low.Store(limit)
	s.inflight.Store(0)
	s.announced.Store(false)
	s.until.Store(next)
	storeMax(&q.until, next)
	return instant(next), true
}

// window returns the reset of s's window, in stamp nanoseconds (0 when
// none is held), and whether it has ended at now, to be renewed or
// dropped.
func (s *quotaSlot) window(now time.Time) (u int64, ended bool) {
	u = s.until.Load()
	return u, u != 0 && !holds(u, stamp(now))
}

// heldUntil returns the reset u, in stamp nanoseconds, as a time, and
// whether it is a window held: 0 is none.
func heldUntil(u int64) (time.Time, bool) { return instant(u), u != 0 }

// renewedReset returns the reset of the window holding now, for windows
// of period that follow one ending at until ≤ now.
func renewedReset(until, now, period int64) int64 {
	return until + period*(1+(now-until)/period)
}

// storeMax stores v in a unless a holds more.
func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if max(old, v) == old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// wants reports whether the headers of a response of the given status
// should be read for the quota, as quotaState describes: a 429's; any
// while a quota is held; else while fewer than quotaMisses responses in a
// row had no rate-limit fields.
func (q *quotaState) wants(status int) bool {
	return status == http.StatusTooManyRequests || q.until.Load() != 0 || q.misses.Load() < quotaMisses
}

// sample starts reading a destination's responses again when h, the
// header of a response not read, carries rate-limit fields: a destination that sent none for
// quotaMisses responses and then starts to is read again before its
// first 429. It looks the fields up without parsing them.
func (q *quotaState) sample(h http.Header) {
	if q.misses.Load() != 0 && hasRateLimitFields(h) {
		q.misses.Store(0)
	}
}

// miss counts whether a response read carried rate-limit fields (has):
// one with fields starts the count of misses again, one without adds to
// it, up to quotaMisses.
func (q *quotaState) miss(has bool) {
	m := q.misses.Load()
	if has {
		if m != 0 {
			q.misses.Store(0)
		}
		return
	}
	q.misses.CompareAndSwap(m, min(m+1, quotaMisses))
}

// observe reads what an answer says of the quotas. Of several quotas the
// response announces, a 429 spends the one ParseRateLimit returns, the
// one with the least left; the others take the counts announced. A 429's
// Retry-After is r's, as the caller read it.
func (q *quotaState) observe(r *Result, now time.Time) {
	set := parseRateLimits(r.Header, now)
	q.miss(set.n > 0)
	st, ra, hasRA := quotaStatus(r)
	sent := r.Sent
	q.mu.Lock()
	defer q.mu.Unlock()
	if v := r.Header[apfPriorityLevel]; len(v) > 0 {
		q.observeLevel(r, v[0], now)
	}
	var names [maxQuotaNames]string
	if st == http.StatusTooManyRequests && pausesDestination(&set, q.namesHeld(names[:0])) {
		if a, ok := quotaAnnounced(set.rl[0], st, ra, hasRA); ok {
			q.pause(stamp(now.Add(a.rl.Reset)), now)
			return
		}
		// A 429 that names no time to pause for pauses nothing.
		q.unanswered()
		q.answered(false, st)
		return
	}
	var group uint32
	var named uint32 // the slots of the quotas the response named
	apart := namedApart(r.Header, &set)
	for i := range max(set.n, 1) {
		status := st
		if i > 0 {
			status = http.StatusOK
		}
		if a, ok := quotaAnnounced(set.rl[i], status, ra, hasRA); ok {
			bit := q.update(a, group, now, sent)
			q.slots[bits.TrailingZeros32(bit)].apart.Store(apart)
			group |= bit
			if a.rl.Name != "" {
				named |= bit
			}
		}
	}
	for i := range q.slots {
		if group&(1<<i) != 0 {
			q.slots[i].group.Store(group)
		}
	}
	if group == 0 {
		// Nothing said of the quota: the request's count in flight
		// ends as for one that got no response.
		q.unanswered()
	}
	// A quota named apart paces its route alone: the release goes on
	// for the others, and the answer counts as any other.
	q.answered(group != 0 && !apart, st)
	if named != 0 {
		// The quotas named together are one group: any one of them
		// names it.
		q.rememberRoute(r.Request, bits.TrailingZeros32(named), now)
	}
}

// namedApart reports whether the quota set, read from h, was named by a
// field that names the one quota the request counted against, among
// others the destination meters apart: GitHub's X-RateLimit-Resource,
// Discord's X-RateLimit-Bucket. A RateLimit policy's name does not: a
// server may name its only policy ("default").
func namedApart(h http.Header, set *rateLimits) bool {
	name := set.rl[0].Name
	return set.n == 1 && name != "" && (name == quotaField(h, xFields.resource) || name == quotaField(h, xFields.bucket))
}

// apfPriorityLevel names the priority level of Kubernetes API Priority
// and Fairness that answered a request, in its canonical spelling.
const apfPriorityLevel = "X-Kubernetes-Pf-Prioritylevel-Uid"

// quotaStatus returns the status an answer is read as for the quota, and
// the Retry-After it pauses its destination for, if any: a 429's, or a
// 403's, read as a 429 (GitHub answers its secondary rate limit with a
// 403 and Retry-After).
func quotaStatus(r *Result) (status int, ra time.Duration, hasRA bool) {
	if r.Status == http.StatusTooManyRequests && len(r.Header[apfPriorityLevel]) > 0 {
		// Kubernetes API Priority and Fairness refused the request for
		// its priority level alone: no quota of the whole server is
		// spent (observeLevel pauses that level's routes), and other
		// levels (a controller's lease renewal) still go. The 429 is an
		// overload signal, counted as any other.
		return http.StatusOK, 0, false
	}
	if r.Status == http.StatusTooManyRequests {
		return r.Status, r.RetryAfter, r.HasRetryAfter
	}
	if r.Status == http.StatusForbidden && r.HasRetryAfter {
		return http.StatusTooManyRequests, r.RetryAfter, true
	}
	return r.Status, 0, false
}

// releaseAnswers is how many answers in a row without a 429 end a
// release: the server took that many past the pause one at a time.
const releaseAnswers = 10

// release is the state of the operations held for a pause (or for a
// spent quota whose new window's count is not known) as they are let go
// after it: one at a time, each as the answer of the one before arrives,
// so that the callers held do not all reach the server at the instant
// the pause ends before any answer says what it admits. A 429 among the
// answers pauses the destination again (one that names no time to pause
// for lets the next go, as an attempt without an answer does); an
// answer that announces a quota every request may draw from ends the
// release, the quota's count pacing from there (one named apart paces
// its route alone, see namedApart); so do releaseAnswers answers in a
// row without a 429. q.mu protects it.
type release struct {
	gen     uint64        // this release's number among the destination's, from 1
	tokens  int           // operations that may be sent now
	out     int           // turns taken and not yet given back (by an answer, an attempt without one, or a refund)
	answers int           // answers without a 429 since the release began
	wake    chan struct{} // closed at the next answer, for the operations held
}

// startRelease starts a release with one operation let go. q.mu must be
// held.
func (q *quotaState) startRelease() {
	q.rel.stop()
	q.releases++
	q.rel = release{gen: q.releases, tokens: 1, wake: make(chan struct{})}
	q.releasing.Store(true)
}

// stop ends a release, waking the operations held to ask again.
func (r *release) stop() {
	if r.wake != nil {
		close(r.wake)
	}
	*r = release{}
}

// endPause ends the pause that lasted until p, once, and starts a
// release. The release starts before the pause is seen gone: a caller
// that finds no pause then finds the release, and neither admits itself
// nor takes the destination for idle.
func (q *quotaState) endPause(p int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.paused.Load() != p {
		return
	}
	q.startRelease()
	q.paused.Store(0)
}

// releaseOne asks whether an operation may go during a release: ok when
// one may (or the release has ended); turn, when take is set and it took
// the release's turn, the release's generation, for returnTurn if the
// attempt is then not sent.
func (q *quotaState) releaseOne(take bool) (ok bool, turn uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.releasing.Load() {
		return true, 0
	}
	if q.rel.tokens <= 0 {
		return false, 0
	}
	if take {
		q.rel.tokens--
		q.rel.out++
		return true, q.rel.gen
	}
	return true, 0
}

// released gives back, during a release, the turn of an attempt that
// ended: an answer arrived (answered, not a 429), or the attempt ended
// without one. releaseAnswers answers end the release.
func (q *quotaState) released(answered bool) {
	if !q.releasing.Load() {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.releasedLocked(answered)
}

// releasedLocked is released with q.mu held.
func (q *quotaState) releasedLocked(answered bool) {
	if !q.releasing.Load() {
		return
	}
	if answered {
		q.rel.answers++
	}
	if q.rel.answers >= releaseAnswers {
		q.endRelease()
		return
	}
	q.giveTurnLocked()
}

// returnTurn gives back the turn an attempt that was not sent took of
// release gen, if that release is still under way.
func (q *quotaState) returnTurn(gen uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.releasing.Load() && q.rel.gen == gen {
		q.giveTurnLocked()
	}
}

// giveTurnLocked lets the next operation held go, waking those held,
// for a turn given back: a release gives back no more turns than were
// taken, so an attempt whose end is told twice (its request refunded,
// then its missing answer recorded) lets one operation go, not two.
// q.mu must be held.
func (q *quotaState) giveTurnLocked() {
	if q.rel.out <= 0 {
		return
	}
	q.rel.out--
	q.rel.tokens++
	close(q.rel.wake)
	q.rel.wake = make(chan struct{})
}

// answered counts an answer of status st for a release: one that
// announced a quota (announced) ends it, the quota's count pacing from
// there; any other lets the next operation go. A 429 that got here
// paused nothing (it named no time to pause for): it gives its turn back
// as an attempt without an answer does, and is not one of the answers
// that end the release. q.mu must be held.
func (q *quotaState) answered(announced bool, st int) {
	if announced && q.releasing.Load() {
		q.endRelease()
		return
	}
	q.releasedLocked(st != http.StatusTooManyRequests)
}

// endRelease ends a release: every operation held may ask again, and
// is admitted as without a pause. q.mu must be held.
func (q *quotaState) endRelease() {
	q.rel.stop()
	q.releasing.Store(false)
}

// releaseWait returns a channel closed at the next answer during a
// release; nil when the caller may ask again at once: outside a release,
// or while a turn is free. A turn given back after the caller was refused
// and before it asked for the channel is free now, and the channel it
// closed is gone: waiting on the next one would miss it.
func (q *quotaState) releaseWait() <-chan struct{} {
	if !q.releasing.Load() {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.releasing.Load() || q.rel.tokens > 0 {
		return nil
	}
	return q.rel.wake
}

// pause refuses every request to the destination until until, and ends
// the count in flight of the request that met the pause.
func (q *quotaState) pause(until int64, now time.Time) {
	q.unanswered()
	q.known(now)
	q.rel.stop()
	q.releasing.Store(false)
	storeMax(&q.paused, until)
	storeMax(&q.until, until)
}

// known keeps, the first time a quota is known, when that was.
func (q *quotaState) known(now time.Time) {
	if q.knownAt.Load() == 0 {
		q.knownAt.CompareAndSwap(0, stamp(now))
	}
}

// namesHeld appends the names of the quotas held to names. q.mu must be
// held.
func (q *quotaState) namesHeld(names []string) []string {
	for i := range q.slots {
		if q.slots[i].until.Load() != 0 {
			names = append(names, q.slots[i].name)
		}
	}
	return names
}

// pausesDestination decides whether a 429 that announced set pauses its
// whole destination, which holds the quotas named held, rather than
// spending one quota. A 429 that names a quota (a RateLimit policy, an
// X-RateLimit-Resource) spends that one, and its group; so does one that
// names none when the destination holds an unnamed quota, or holds none
// (the 429's is then its only quota). A 429 that names none (Retry-After
// alone, a secondary limit's; X-RateLimit fields a gateway adds beside
// the named quotas of the application behind it) while only named quotas
// are held does not say which one it spent: it pauses the destination,
// every request to it refused until its reset.
func pausesDestination(set *rateLimits, held []string) bool {
	if len(held) == 0 {
		return false
	}
	for i := range set.n {
		if set.rl[i].Name != "" {
			return false
		}
	}
	return !slices.Contains(held, "")
}

// update keeps what a response announced of one quota, in a slot not in
// taken, and returns that slot's bit. q.mu must be held.
func (q *quotaState) update(a announcement, taken uint32, now, sent time.Time) uint32 {
	i := q.slot(a.rl.Name, taken)
	s := &q.slots[i]
	inflight := decrementIfPositive(&s.inflight)
	held := heldQuota{until: s.until.Load(), left: s.left.Load(), low: s.low.Load(), inflight: inflight, period: s.period.Load(),
		guessed: !s.announced.Load() && !s.sized.Load(), knownAt: q.knownAt.Load()}
	until, left, low := quotaUpdate(a.rl, a.spent, held, now, sent)
	if a.paced {
		// A window's count says how large the quota is and how long
		// its window lasts, when the headers do not.
		s.limit.Store(limitOf(a.rl, s.limit.Load()))
		s.period.Store(periodOf(a.rl, s.period.Load()))
		if a.rl.Limit > 0 && !s.sized.Load() {
			s.sized.Store(true)
		}
	}
	s.left.Store(left)
	s.low.Store(low)
	s.until.Store(until)
	s.announced.Store(true)
	q.known(now)
	storeMax(&q.until, until)
	return 1 << i
}

// slot returns the index of the slot of the quota named name: its own, a
// free one, or the one that resets first, never one in taken. q.mu must
// be held.
func (q *quotaState) slot(name string, taken uint32) int {
	free, first := -1, -1
	for i := range q.slots {
		s := &q.slots[i]
		u := s.until.Load()
		if taken&(1<<i) != 0 {
			continue
		}
		if s.name == name && u != 0 {
			return i
		}
		if u == 0 && (free == -1 || s.name == name) {
			free = i
		}
		if u != 0 && (first == -1 || evictsBefore(s, &q.slots[first])) {
			first = i
		}
	}
	if free == -1 {
		free = first
	}
	if s := &q.slots[free]; s.name != name {
		s.name = strings.Clone(name) // not the header's memory
		s.limit.Store(0)
		s.sized.Store(false)
		s.period.Store(0)
		s.inflight.Store(0)
		for j := range q.slots {
			q.slots[j].group.And(^uint32(1 << free))
		}
		s.group.Store(1 << free)
	}
	return free
}

// evictsBefore reports whether the held quota a gives its place to a new
// name before b: a quota with requests left before a spent one, which
// would otherwise be forgotten and sent to until its server says it is
// spent again; among those alike, the one that resets first. s.mu must
// be held.
func evictsBefore(a, b *quotaSlot) bool {
	aSpent, bSpent := a.left.Load() <= 0, b.left.Load() <= 0
	if aSpent != bSpent {
		return !aSpent
	}
	// Of two that reset together, either may go first.
	return cmp.Less(a.until.Load(), b.until.Load())
}

// decrementIfPositive takes one from a unless it is 0, and returns what
// is left: a response read for an operation that did not take from the
// count (a retry, or one admitted before the quota was known) does not
// take it below 0.
func decrementIfPositive(a *atomic.Int64) int64 {
	for {
		n := a.Load()
		if n <= 0 || a.CompareAndSwap(n, n-1) {
			return max(n-1, 0)
		}
	}
}

// announcement is what a response says of a quota, for quotaUpdate.
type announcement struct {
	rl    RateLimit
	spent bool // nothing is left until rl.Reset, whatever rl.Remaining says
	paced bool // rl.Reset is the quota window's, not a Retry-After pause
}

// quotaLeftPause is the longest a 429 that says quota is left, without a
// Retry-After, pauses its quota: it was refused by another limit than
// the one its headers count (GitHub's secondary rate limit, beside the
// primary quota's fields), whose end they do not give; GitHub asks for
// at least a minute then.
const quotaLeftPause = time.Minute

// quotaAnnounced decides what a response says of its quota, given its
// rate-limit headers (rl, the zero RateLimit when they announce none),
// its status and, on a 429, its Retry-After (ra, when hasRA). A response
// below 429 announces a quota when its headers give a reset. A 429 spends the quota: until the
// headers' reset when they say none remains, else for the Retry-After
// the server asked (a 429 with quota left, or with a reset that cannot
// be read, is a pause, not the quota's end), else until the headers'
// reset, but for at most quotaLeftPause when they say quota is left;
// with neither, nothing is kept. A Retry-After bounds the headers' reset
// (see resetAgrees): a reset already past, or later than the
// Retry-After, is not believed, and the quota is spent for the
// Retry-After, its window's length not learned from it.
func quotaAnnounced(rl RateLimit, status int, ra time.Duration, hasRA bool) (announcement, bool) {
	if status != http.StatusTooManyRequests {
		return announcement{rl: rl, paced: true}, rl.HasReset
	}
	if rl.Remaining == 0 && rl.HasReset && resetAgrees(rl.Reset, ra, hasRA) {
		return announcement{rl: rl, spent: true, paced: true}, true
	}
	if hasRA {
		rl.Reset, rl.HasReset = min(ra, maxRateLimitReset), true
		return announcement{rl: rl, spent: true}, true
	}
	if rl.HasReset && rl.Reset > quotaLeftPause {
		rl.Reset = quotaLeftPause
		return announcement{rl: rl, spent: true}, true
	}
	if rl.HasReset {
		return announcement{rl: rl, spent: true, paced: true}, true
	}
	return announcement{}, false
}

// resetAgrees reports whether a spent quota's reset, read from a reset
// field, agrees with the Retry-After (ra, when hasRA) of the same 429:
// it is not past, and no later than the Retry-After by more than the
// second resets are rounded to. Without a Retry-After any reset agrees.
// A reset field misread (a Unix time in milliseconds, a server's clock
// hours off its Date) gives a reset of 0 or of up to a day, and the
// server's own word of when to come back is the Retry-After.
func resetAgrees(reset, ra time.Duration, hasRA bool) bool {
	return !hasRA || (reset > 0 && reset <= ra+quotaSame)
}

// heldQuota is what a destination holds of one quota, for quotaUpdate:
// its window's reset (0 for none), the requests left in it here, the
// least count a response announced in it, the operations still in flight
// that took from it, the window's length when known, and whether its
// count is a guess: a window renewed at a reset, not yet answered, whose
// size no response announced (it was taken from the most seen).
type heldQuota struct {
	until, left, low, inflight, period int64
	guessed                            bool
	knownAt                            int64 // when the destination's first quota was known, 0 if not
}

// quotaUpdate decides the quota to keep after a response announced rl,
// given the one held: the window's reset, the count here and the
// server's count, the least announced in the window. Within one window
// the server's count never rises: an answer with more left than one
// already read was counted before it and arrived late, and says nothing
// new. So the server's count is the least announced; with nothing in
// flight it is the count here (a server may not count some requests),
// and otherwise the smaller of it and the count here holds, since
// requests admitted after the server counted are still on their way. An
// answer for a new window takes the server's count, and so does the
// first answer in a window whose count was a guess; spent, nothing is
// left.
func quotaUpdate(rl RateLimit, spent bool, q heldQuota, now, sent time.Time) (until, left, low int64) {
	remaining := rl.Remaining
	if spent {
		remaining = 0
	}
	from := countedFrom(sent, now, spent)
	if by := sentBy(sent, q.knownAt); q.until != 0 && !shortWindow(q.period) && by != unknownTime && by < q.until-q.period {
		// Counted before the held window began: an answer of the one
		// before, read late, which says nothing of this one. (Resets
		// in whole seconds cannot place a short window that finely.)
		return q.until, q.left, q.low
	}
	next := stamp(now.Add(rl.Reset))
	if q.until == 0 || q.guessed || !sameWindow(q.until, rl.Reset, from, now) || newerWindow(next, remaining, q) {
		return next, remaining, remaining
	}
	low = min(q.low, remaining)
	if q.inflight > 0 {
		return q.until, min(q.left, remaining), low
	}
	return q.until, low, low
}

// unknownTime stands for a time not known, in countedFrom and sameWindow.
const unknownTime = math.MinInt64

// countedFrom returns the earliest time, in stamp nanoseconds (see stamp), at which
// the server may have counted an answer read at now: when its attempt was
// sent. An attempt sent before its destination's quota was known did not
// read the clock: for a 429 that is taken as now, so that it spends a
// window from now, as it says; for another answer it is unknownTime, so
// that the answer, which may be late, starts no new window.
func countedFrom(sent, now time.Time, spent bool) int64 {
	if sent.IsZero() && !spent {
		return unknownTime
	}
	if sent.IsZero() || sent.After(now) {
		return stamp(now)
	}
	return stamp(sent)
}

// sentBy returns the latest time, in stamp nanoseconds (see stamp), an answer's
// attempt was sent: when it was, or, for one that did not read the
// clock, when the destination's first quota was known (knownAt), since
// only attempts sent before it do not; unknownTime when neither is known.
func sentBy(sent time.Time, knownAt int64) int64 {
	if !sent.IsZero() {
		return stamp(sent)
	}
	if knownAt != 0 {
		return knownAt
	}
	return unknownTime
}

// sameWindow reports whether an answer read at now, counted by the server
// no earlier than from (unknownTime when not known), whose quota resets
// reset after the server counted it, names the held window, which resets
// at until. Its window resets between from+reset and now+reset, and up to
// quotaSame earlier still, as resets are announced in whole seconds
// rounded up; until must lie in that span, within quotaSame.
func sameWindow(until int64, reset time.Duration, from int64, now time.Time) bool {
	if until > stamp(now.Add(reset))+int64(quotaSame) {
		return false
	}
	return from == unknownTime || from+int64(reset)-int64(quotaSame) <= until
}

// newerWindow reports whether an answer whose reset is next, with
// remaining left, is for a window newer than the one held, however
// close their resets: resets in whole seconds cannot tell the windows of
// a quota of a second or two apart (a window of up to 2·quotaSame, or of
// a length not known), and a later reset with more left at the server
// than here and in flight is a newer window. For longer windows a newer
// one has a reset more than quotaSame later, and an answer with a reset
// close to the one held and more left is a late one.
func newerWindow(next, remaining int64, q heldQuota) bool {
	return shortWindow(q.period) && next > q.until && remaining > max(q.left, 0)+q.inflight
}

// shortWindow reports whether a quota window of period nanoseconds (0
// when not known) is too short for resets in whole seconds to tell it
// from the next: up to 2·quotaSame.
func shortWindow(period int64) bool { return period <= int64(2*quotaSame) }

// limitOf returns a quota's size: the announced limit, else the most a
// window was seen to hold, a response's remaining count and the request
// it answered.
func limitOf(rl RateLimit, known int64) int64 {
	if rl.Limit > 0 {
		return rl.Limit
	}
	return max(known, min(rl.Remaining, maxSFInteger-1)+1)
}

// periodOf returns a quota window's length in nanoseconds: the announced
// window, else the longest reset seen.
func periodOf(rl RateLimit, known int64) int64 {
	if rl.Window > 0 {
		return int64(rl.Window)
	}
	return max(known, int64(rl.Reset))
}

// refusing keeps whether d's quota refuses requests at now, as a check
// found: d is then pinned in its table (see destPinned) until a check
// finds it open again, and so is its destination, while any of its
// credentials is.
func (d *Dest) refusing(yes bool, now time.Time) {
	q := &d.quota
	pinned := q.pin.Load() != 0
	if yes && !pinned && q.pin.CompareAndSwap(0, stamp(now)) && d.host != nil {
		if d.host.credsPinned.Add(1) == 1 {
			d.host.credsPinnedSince.Store(stamp(now))
		}
	}
	if !yes && pinned && q.pin.Swap(0) != 0 && d.host != nil {
		d.host.credsPinned.Add(-1)
	}
}

// destPinned tells the tables of destinations and credentials which
// states they must not evict, and since when they are pinned: those
// whose quota was last found refusing requests while a quota is still
// held, and destinations holding such a credential. A spent quota
// forgotten would let its destination be sent to again before its
// reset, once for every eviction.
var destPinned = func(d *Dest) int64 {
	if p := d.quota.pin.Load(); p != 0 && d.quota.until.Load() != 0 {
		return p
	}
	if d.credsPinned.Load() > 0 {
		return d.credsPinnedSince.Load()
	}
	return 0
}
