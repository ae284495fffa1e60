package pgidempotency

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/pgidempotency/internal/pgtest"
	"github.com/httpretry/httpretry/idempotency"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestTxRowsAndRecordedResponseCommitTogether: ten concurrent duplicates
// of one keyed charge produce one charge row and one recorded response;
// every 201 any of them gets is that response, byte for byte, and a later
// retry replays it. Under SERIALIZABLE too: the duplicates' Reserve only
// reads the record (its ON CONFLICT changes no row it does not take), so
// the first run's CompleteTx meets no serialization failure.
func TestTxRowsAndRecordedResponseCommitTogether(t *testing.T) {
	for _, iso := range []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.RepeatableRead, pgx.Serializable} {
		t.Run(string(iso), func(t *testing.T) {
			f := newFixture(t, Options{TxOptions: pgx.TxOptions{IsoLevel: iso}}, false)
			slow := make(chan struct{})
			var conflicts atomic.Int64
			srv := f.serve(func(w http.ResponseWriter, r *http.Request) {
				chargeHandler(w, r)
				<-slow // the duplicates arrive while this run holds its key
			}, idempotency.Options{OnEvent: func(e idempotency.Event) {
				if e.Kind == idempotency.KindConflict {
					conflicts.Add(1)
				}
			}})
			o := order{ID: "o-1", Amount: 1299}
			answers := make([]answer, 10)
			var wg sync.WaitGroup
			for i := range answers {
				wg.Go(func() { answers[i] = post(t, srv.URL, "key-1", o) })
			}
			waitFor(t, 20*time.Second, "the nine duplicates never met the running first", func() bool {
				return conflicts.Load() == 9
			})
			close(slow)
			wg.Wait()
			final := post(t, srv.URL, "key-1", o)
			if final.status != http.StatusCreated {
				t.Fatalf("retry after the duplicates: %d %s", final.status, final.body)
			}
			created := 0
			for i, a := range answers {
				switch {
				case a.status == http.StatusConflict:
				case a.status != http.StatusCreated:
					t.Errorf("duplicate %d: %d %s", i, a.status, a.body)
				case string(a.body) != string(final.body):
					t.Errorf("duplicate %d got %s, the record is %s", i, a.body, final.body)
				default:
					created++
				}
			}
			if created == 0 {
				t.Fatal("no duplicate got the 201: the first run failed")
			}
			if final.header.Get(idempotency.ReplayedHeader) != "true" {
				t.Errorf("the retry was not a replay: %v", final.header)
			}
			if n := f.charges("o-1"); n != 1 {
				t.Fatalf("charges = %d, want 1", n)
			}
			if all, done := f.records(); all != 1 || done != 1 {
				t.Fatalf("records = %d (%d completed), want 1 completed", all, done)
			}
			if got := f.store.commits.Load(); got != 1 {
				t.Fatalf("commits = %d, want 1", got)
			}
		})
	}
}

// TestTxLostCommitAckIsNeverFollowedByRelease: when the COMMIT's
// acknowledgement is lost, whether the transaction committed is unknown,
// so the key is never released; the client is answered 503, and the lock
// runs out. A committed transaction is then replayed; one that did not
// commit runs again once the lock expired: one charge either way, never
// two and never none.
func TestTxLostCommitAckIsNeverFollowedByRelease(t *testing.T) {
	const lockTTL = 1500 * time.Millisecond
	cases := []struct {
		name      string
		fate      pgtest.Fate
		committed bool
	}{
		{"answer_lost_after_commit", pgtest.LoseAnswer, true},
		{"commit_lost_before_server", pgtest.LoseCommit, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, Options{}, true)
			var once sync.Once
			f.proxy.Commit = func() pgtest.Fate {
				fate := pgtest.Deliver
				once.Do(func() { fate = c.fate })
				return fate
			}
			srv := f.serve(chargeHandler, idempotency.Options{LockTTL: lockTTL})
			o := order{ID: "o-lost", Amount: 500}
			first := post(t, srv.URL, "key-lost", o)
			if first.status != http.StatusServiceUnavailable || first.header.Get("Retry-After") == "" {
				t.Fatalf("first answer = %d %s, want 503 with Retry-After", first.status, first.body)
			}
			if got := f.store.releases.Load(); got != 0 {
				t.Fatalf("Release called %d times after a lost COMMIT acknowledgement, want 0", got)
			}
			if got := f.charges("o-lost"); got != map[bool]int{true: 1, false: 0}[c.committed] {
				t.Fatalf("charges after the lost acknowledgement = %d, committed %v", got, c.committed)
			}
			var again answer
			start := time.Now()
			waitFor(t, 20*time.Second, "the key never answered 201", func() bool {
				again = post(t, srv.URL, "key-lost", o)
				return again.status == http.StatusCreated
			})
			if c.committed && again.header.Get(idempotency.ReplayedHeader) != "true" {
				t.Fatalf("a committed charge was not replayed: %v %s", again.header, again.body)
			}
			if !c.committed && again.header.Get(idempotency.ReplayedHeader) != "" {
				t.Fatalf("a charge never committed was replayed: %s", again.body)
			}
			if !c.committed && time.Since(start) < lockTTL/2 {
				t.Fatalf("the key ran again %v after the lost COMMIT, before its lock could expire", time.Since(start))
			}
			if got := f.charges("o-lost"); got != 1 {
				t.Fatalf("charges = %d, want exactly 1", got)
			}
			if got := f.store.releases.Load(); got != 0 {
				t.Fatalf("Release called %d times, want 0", got)
			}
			lost := f.proxy.LostAnswers.Load() + f.proxy.LostCommits.Load()
			if lost != 1 {
				t.Fatalf("the proxy lost %d COMMIT messages or answers, want 1", lost)
			}
		})
	}
}

// TestTxStalledHandlerIsFencedAndItsRowsRollBack: a handler stalls past
// its lock; a retry takes the key over and charges. When the stalled one
// resumes, its CompleteTx fails with ErrStaleToken and its charge rolls
// back with it: one charge, the successor's, replayed from then on.
func TestTxStalledHandlerIsFencedAndItsRowsRollBack(t *testing.T) {
	const lockTTL = 300 * time.Millisecond
	f := newFixture(t, Options{}, false)
	stalled := make(chan struct{})
	resume := make(chan struct{})
	var calls sync.Mutex
	first := true
	srv := f.serve(func(w http.ResponseWriter, r *http.Request) {
		calls.Lock()
		stall := first
		first = false
		calls.Unlock()
		chargeHandler(w, r)
		if stall {
			close(stalled)
			<-resume
		}
	}, idempotency.Options{LockTTL: lockTTL})
	var firstAnswer answer
	done := make(chan struct{})
	go func() {
		defer close(done)
		firstAnswer = post(t, srv.URL, "key-stall", order{ID: "o-stall", Amount: 1})
	}()
	<-stalled
	var second answer
	waitFor(t, 10*time.Second, "the retry never took the key over", func() bool {
		second = post(t, srv.URL, "key-stall", order{ID: "o-stall", Amount: 1})
		return second.status == http.StatusCreated
	})
	close(resume)
	<-done
	if firstAnswer.status != http.StatusConflict {
		t.Fatalf("the fenced request answered %d %s, want 409 (its key belongs to its successor)", firstAnswer.status, firstAnswer.body)
	}
	if got := f.charges("o-stall"); got != 1 {
		t.Fatalf("charges = %d, want 1 (the stalled run's rolled back)", got)
	}
	replay := post(t, srv.URL, "key-stall", order{ID: "o-stall", Amount: 1})
	if err := sameAnswer(second, replay); err != nil {
		t.Fatal(err)
	}
}

// TestCompleteTxOfATakenOverReservationIsStale: CompleteTx in a
// transaction whose reservation was taken over returns ErrStaleToken, and
// the rows written in that transaction roll back with it — under every
// isolation level: under REPEATABLE READ and SERIALIZABLE the takeover,
// committed after the transaction's snapshot, makes the UPDATE fail with
// a serialization failure (40001), which is the stale token all the same.
func TestCompleteTxOfATakenOverReservationIsStale(t *testing.T) {
	for _, iso := range []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.RepeatableRead, pgx.Serializable} {
		t.Run(string(iso), func(t *testing.T) { completeTxOfATakenOverReservation(t, iso) })
	}
}

func completeTxOfATakenOverReservation(t *testing.T, iso pgx.TxIsoLevel) {
	f := newFixture(t, Options{TxOptions: pgx.TxOptions{IsoLevel: iso}}, false)
	ctx := t.Context()
	s := f.store.Store
	old, err := s.Reserve(ctx, "k", "fp", 100*time.Millisecond)
	if err != nil || old.State != idempotency.StateReserved {
		t.Fatalf("Reserve = %+v, %v", old, err)
	}
	tx, err := s.BeginTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Ended before the pool closes, whatever the verdict.
	defer s.RollbackTx(context.Background(), tx)
	if _, err := tx.Exec(ctx, "INSERT INTO charges (order_id, amount) VALUES ('o-old', 1)"); err != nil {
		t.Fatal(err)
	}
	var took idempotency.Reservation
	waitFor(t, 10*time.Second, "no takeover", func() bool {
		took, err = s.Reserve(ctx, "k", "fp", time.Minute)
		return err == nil && took.State == idempotency.StateReserved
	})
	if !took.TookOver || took.Token <= old.Token {
		t.Fatalf("takeover = %+v, want TookOver and a greater token than %d", took, old.Token)
	}
	err = s.CompleteTx(ctx, tx, "k", old.Token, &idempotency.Response{Status: 201}, time.Hour)
	if !errors.Is(err, idempotency.ErrStaleToken) {
		t.Fatalf("CompleteTx of the old owner = %v, want ErrStaleToken", err)
	}
	if err := s.RollbackTx(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if got := f.charges("o-old"); got != 0 {
		t.Fatalf("the fenced transaction's charge stayed: %d", got)
	}
	if all, done := f.records(); all != 1 || done != 0 {
		t.Fatalf("records = %d (%d completed), want the successor's reservation alone", all, done)
	}
}

// TestTxCommitPastTheStoreTimeoutIsUnknownAndNeverReleased: the COMMIT
// meets a server that does not answer (held, as by a pause or a
// partition) until the store's Timeout cuts it: its outcome is unknown,
// so the client gets 503 and the key is not released. The server never
// got the COMMIT: its session idles in the transaction, holding the key's
// record locked (a Reserve of the key answers in progress) until
// idle_in_transaction_session_timeout ends it and rolls back. Once the
// lock expired too, the retry runs and charges once.
func TestTxCommitPastTheStoreTimeoutIsUnknownAndNeverReleased(t *testing.T) {
	f := newFixture(t, Options{Timeout: 300 * time.Millisecond}, true, func(c *pgxpool.Config) {
		c.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = "500"
	})
	var once sync.Once
	f.proxy.Commit = func() pgtest.Fate {
		fate := pgtest.Deliver
		once.Do(func() { fate = pgtest.Hold })
		return fate
	}
	srv := f.serve(chargeHandler, idempotency.Options{LockTTL: time.Second})
	o := order{ID: "o-held", Amount: 9}
	start := time.Now()
	first := post(t, srv.URL, "k-held", o)
	if first.status != http.StatusServiceUnavailable {
		t.Fatalf("first = %d %q, want 503", first.status, first.body)
	}
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Fatalf("answered after %v, before the store's timeout", el)
	}
	if got := f.store.releases.Load(); got != 0 {
		t.Fatalf("releases = %d after a COMMIT of unknown outcome, want 0", got)
	}
	var a answer
	waitFor(t, 20*time.Second, "never charged", func() bool {
		a = post(t, srv.URL, "k-held", o)
		return a.status == http.StatusCreated
	})
	if a.header.Get(idempotency.ReplayedHeader) != "" {
		t.Fatalf("a transaction that never committed was replayed: %q", a.body)
	}
	if got := f.charges("o-held"); got != 1 {
		t.Fatalf("charges = %d, want 1", got)
	}
	if f.proxy.Held.Load() != 1 {
		t.Fatalf("held COMMITs = %d, want 1", f.proxy.Held.Load())
	}
}
