package throttle

import (
	"net/http"
	"testing"
	"time"
)

// TestQuotaEvictsBeforeGivesUpAQuotaWithRequestsLeftFirst: of two held
// quotas, the one that gives its place to a new name first is one with
// requests left before a spent one, whatever their resets; among two
// alike, the one that resets first.
func TestQuotaEvictsBeforeGivesUpAQuotaWithRequestsLeftFirst(t *testing.T) {
	t.Parallel()
	slot := func(left, until int64) *quotaSlot {
		s := new(quotaSlot)
		s.left.Store(left)
		s.until.Store(until)
		return s
	}
	tests := []struct {
		name string
		a, b *quotaSlot
		want bool
	}{
		{"a with requests left, b spent, b resets later", slot(3, 20), slot(0, 30), true},
		{"a spent, b with requests left, a resets first", slot(0, 10), slot(3, 20), false},
		{"both with requests left, a resets first", slot(3, 10), slot(5, 20), true},
		{"both with requests left, a resets later", slot(3, 30), slot(5, 20), false},
		{"both spent, a resets first", slot(0, 10), slot(0, 20), true},
	}
	for _, tt := range tests {
		if got := evictsBefore(tt.a, tt.b); got != tt.want {
			t.Errorf("%s: evictsBefore = %v; want %v", tt.name, got, tt.want)
		}
	}
}

// TestQuotaNamesAnnouncedTogetherAreAllKept: four quotas held, "b"
// resetting first; a response announces two new ones, "e" and "f"
// (resetting in 5s and 6s): "e" takes b's place, and "f" the place of
// the one that resets first among the others ("a"), never e's, which
// was announced with it.
func TestQuotaNamesAnnouncedTogetherAreAllKept(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	var q quotaState
	observeAt(&q, 200, http.Header{"Ratelimit": {`"a";r=5;t=100`}}, now)
	observeAt(&q, 200, http.Header{"Ratelimit": {`"b";r=5;t=10`}}, now)
	observeAt(&q, 200, http.Header{"Ratelimit": {`"c";r=5;t=200`}}, now)
	observeAt(&q, 200, http.Header{"Ratelimit": {`"d";r=5;t=300`}}, now)
	observeAt(&q, 200, http.Header{"Ratelimit": {`"e";r=5;t=5, "f";r=5;t=6`}}, now)
	held := map[string]bool{}
	for i := range q.slots {
		if q.slots[i].until.Load() != 0 {
			held[q.slots[i].name] = true
		}
	}
	if len(held) != maxQuotaNames || !held["e"] || !held["f"] || !held["c"] || !held["d"] {
		t.Errorf("held %v; want c, d, e and f", held)
	}
}

// TestQuotaAnswerWithNothingElseInFlightTakesTheServersCount: 10 left;
// three operations admitted (7 left here), two of them end without an
// answer, and the third's answer says 9 left: with nothing else in
// flight, the server's count holds, though above the count here (the
// two never reached it), and 9 more operations are admitted, not 7.
func TestQuotaAnswerWithNothingElseInFlightTakesTheServersCount(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	var q quotaState
	observeAt(&q, 200, http.Header{"Ratelimit": {`"default";r=10;t=60`}}, now)
	for range 3 {
		if _, ok := q.admit(now); !ok {
			t.Fatal("with 10 left: refused; want admitted")
		}
	}
	q.unanswered()
	q.unanswered()
	observeAt(&q, 200, http.Header{"Ratelimit": {`"default";r=9;t=59`}}, now.Add(time.Second))
	admitted := 0
	for range 12 {
		if _, ok := q.admit(now.Add(time.Second)); ok {
			admitted++
		}
	}
	if admitted != 9 {
		t.Errorf("%d of 12 admitted after the answer saying 9 left; want 9", admitted)
	}
}

// TestQuotaLateAnswerIsPlacedOnlyInWindowsLongerThanTwoSeconds: a quota
// of 5 a window, no limit announced; at the window's end one operation
// is admitted in the renewed window, and then the answer of an attempt
// sent 100ms before the renewal is read: 0 left, reset in 1s. For a
// window of 3s it was counted before the held window began, and says
// nothing of it: the next operation is admitted. For a window of 1s or
// 2s, resets in whole seconds cannot place it that finely: it is taken
// at its word, and the next operation is refused.
func TestQuotaLateAnswerIsPlacedOnlyInWindowsLongerThanTwoSeconds(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		window  int
		refused bool
	}{{1, true}, {2, true}, {3, false}} {
		start := time.Unix(1000, 0)
		renewal := start.Add(time.Duration(tt.window) * time.Second)
		var q quotaState
		observeAt(&q, 200, http.Header{"Ratelimit": {`"default";r=4;t=` + itoa(int64(tt.window))}}, start)
		if _, ok := q.admit(renewal); !ok {
			t.Fatalf("window %ds: refused at the renewal; want admitted", tt.window)
		}
		read := renewal.Add(50 * time.Millisecond)
		q.observe(&Result{Status: 200, Header: http.Header{"Ratelimit": {`"default";r=0;t=1`}}, Sent: renewal.Add(-100 * time.Millisecond)}, read)
		if _, ok := q.admit(read); ok == tt.refused {
			t.Errorf("window %ds, after the late answer: admitted %v; want %v", tt.window, ok, !tt.refused)
		}
	}
}

// TestQuotaAnswerWithoutSendTimeReadAfterARenewalIsLate: the first
// answer announces 9 left of a one-minute window (no limit: 10 taken as
// the size); at the window's end one operation is admitted in the
// renewed window; then the answer of an attempt that did not read the
// clock (sent before the quota was known, so before the held window
// began) says 2 left: it says nothing of the held window, and 9 more
// operations are admitted, not 2.
func TestQuotaAnswerWithoutSendTimeReadAfterARenewalIsLate(t *testing.T) {
	t.Parallel()
	start := time.Unix(1000, 0)
	var q quotaState
	observeAt(&q, 200, http.Header{"Ratelimit": {`"default";r=9;t=60`}}, start)
	renewal := start.Add(time.Minute)
	if _, ok := q.admit(renewal); !ok {
		t.Fatal("refused at the renewal; want admitted")
	}
	read := renewal.Add(time.Second)
	q.observe(&Result{Status: 200, Header: http.Header{"Ratelimit": {`"default";r=2;t=59`}}}, read)
	if n := admittedAt(&q, read, 12); n != 9 {
		t.Errorf("%d of 12 admitted after the late answer; want 9", n)
	}
}

// TestQuotaRenewedWindowOfAGuessedSizeTakesItsFirstAnswer: the first
// answer announces 9 left of a one-minute window and no limit, so the
// quota's size is a guess, 10; at the window's end the window is renewed
// with 10, one operation is admitted, and its answer says 48 left (the
// quota is larger than seen): the first answer of a window whose count
// was a guess is taken at its word, and 48 more operations are admitted.
func TestQuotaRenewedWindowOfAGuessedSizeTakesItsFirstAnswer(t *testing.T) {
	t.Parallel()
	start := time.Unix(1000, 0)
	var q quotaState
	observeAt(&q, 200, http.Header{"Ratelimit": {`"default";r=9;t=60`}}, start)
	renewal := start.Add(time.Minute)
	if _, ok := q.admit(renewal); !ok {
		t.Fatal("refused at the renewal; want admitted")
	}
	read := renewal.Add(time.Second)
	q.observe(&Result{Status: 200, Header: http.Header{"Ratelimit": {`"default";r=48;t=59`}}, Sent: renewal}, read)
	if n := admittedAt(&q, read, 60); n != 48 {
		t.Errorf("%d of 60 admitted after the renewed window's first answer; want 48", n)
	}
}

// admittedAt returns how many of n operations q admits at now.
func admittedAt(q *quotaState, now time.Time, n int) int {
	admitted := 0
	for range n {
		if _, ok := q.admit(now); ok {
			admitted++
		}
	}
	return admitted
}

// TestQuotaSameWindowSpansTheResetsAnAnswerMayName: an answer counted
// from from and read at now, whose quota resets in reset, names a
// window that resets between from+reset and now+reset, and up to
// quotaSame earlier still (resets are announced in whole seconds rounded
// up): a held window that resets in that span, its bounds included, is
// the same; one outside it, by a nanosecond, is another. With from not
// known, only the later bound holds.
func TestQuotaSameWindowSpansTheResetsAnAnswerMayName(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	from := stamp(now.Add(-5 * time.Second))
	const reset = 30 * time.Second
	latest := stamp(now.Add(reset)) + int64(quotaSame)
	earliest := from + int64(reset) - int64(quotaSame)
	tests := []struct {
		name  string
		until int64
		from  int64
		want  bool
	}{
		{"at the latest bound", latest, from, true},
		{"a nanosecond past the latest", latest + 1, from, false},
		{"at the earliest bound", earliest, from, true},
		{"a nanosecond before the earliest", earliest - 1, from, false},
		{"before the earliest, from not known", earliest - 1, unknownTime, true},
	}
	for _, tt := range tests {
		if got := sameWindow(tt.until, reset, tt.from, now); got != tt.want {
			t.Errorf("%s: sameWindow = %v; want %v", tt.name, got, tt.want)
		}
	}
}

// TestQuotaNewerWindowOfAShortQuota: of a quota whose window is 2s or
// less (or not known), an answer is for a newer window than the one held
// when its reset is later and it says more is left than here and in
// flight together; a reset no later, or no more left, is the held
// window's. A window longer than 2s is never told apart this way.
func TestQuotaNewerWindowOfAShortQuota(t *testing.T) {
	t.Parallel()
	held := heldQuota{until: 5000, left: 3, inflight: 2, period: int64(2 * quotaSame)}
	tests := []struct {
		name            string
		next, remaining int64
		period          int64
		want            bool
	}{
		{"a later reset, more left", 5001, 6, held.period, true},
		{"the same reset, more left", 5000, 6, held.period, false},
		{"a later reset, as much left as here and in flight", 5001, 5, held.period, false},
		{"a later reset, more left, the window's length not known", 5001, 6, 0, true},
		{"a later reset, more left, a window of 3s", 5001, 6, int64(3 * quotaSame), false},
	}
	for _, tt := range tests {
		q := held
		q.period = tt.period
		if got := newerWindow(tt.next, tt.remaining, q); got != tt.want {
			t.Errorf("%s: newerWindow = %v; want %v", tt.name, got, tt.want)
		}
	}
}

// TestQuotaReturningNameKeepsWhatWasLearnedOfIt: quotas "x" and "a"
// each announce 5 left of a 10s window (a size of 6 learned: the 5 and
// the request answered), then lapse (two windows without an
// announcement) and are dropped. A 429 then names "a" again with a
// Retry-After of 5s only: "a" takes its own place back, not x's, and
// keeps its size and window, so at the Retry-After's end its window is
// renewed with 6 requests.
func TestQuotaReturningNameKeepsWhatWasLearnedOfIt(t *testing.T) {
	t.Parallel()
	start := time.Unix(1000, 0)
	var q quotaState
	observeAt(&q, 200, http.Header{"Ratelimit": {`"x";r=5;t=10`}}, start)
	observeAt(&q, 200, http.Header{"Ratelimit": {`"a";r=5;t=10`}}, start)
	lapsed := start.Add(21 * time.Second)
	q.admit(start.Add(11 * time.Second))
	q.admit(lapsed)
	q.observe(&Result{Status: http.StatusTooManyRequests, Header: http.Header{"Ratelimit": {`"a";r=0`}},
		RetryAfter: 5 * time.Second, HasRetryAfter: true, Sent: lapsed}, lapsed)
	if n := admittedAt(&q, lapsed.Add(5*time.Second), 10); n != 6 {
		t.Errorf("%d of 10 admitted at the Retry-After's end; want 6, a's window renewed", n)
	}
}
