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
