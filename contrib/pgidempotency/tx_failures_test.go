package pgidempotency

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/idempotency"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestTxHandlerErrorReleasesTheKeyAndRollsBack: a 5xx rolls the
// handler's rows back and frees the key (the retry runs again and
// charges once); a final 4xx the handler chose to answer is recorded,
// rows and all, and replayed.
func TestTxHandlerErrorReleasesTheKeyAndRollsBack(t *testing.T) {
	f := newFixture(t, Options{}, false)
	var mu sync.Mutex
	fail := map[string]int{"o-5xx": http.StatusInternalServerError, "o-4xx": http.StatusPaymentRequired}
	srv := f.serve(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := idempotency.TxFrom[pgx.Tx](r.Context())
		var o order
		_ = decode(r, &o)
		if _, err := tx.Exec(r.Context(), "INSERT INTO charges (order_id, amount) VALUES ($1, 1)", o.ID); err != nil {
			dbError(w, err)
			return
		}
		mu.Lock()
		status := fail[o.ID]
		delete(fail, o.ID)
		mu.Unlock()
		if status != 0 {
			http.Error(w, "declined", status)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}, idempotency.Options{})

	a := post(t, srv.URL, "k-5xx", order{ID: "o-5xx"})
	if a.status != 500 || a.header.Get(idempotency.RecordedHeader) != "false" {
		t.Fatalf("5xx answered %d %v", a.status, a.header)
	}
	if got := f.charges("o-5xx"); got != 0 {
		t.Fatalf("a 5xx left %d charges, want its row rolled back", got)
	}
	if all, _ := f.records(); all != 0 {
		t.Fatalf("a 5xx left %d records, want its key released", all)
	}
	if a := post(t, srv.URL, "k-5xx", order{ID: "o-5xx"}); a.status != http.StatusCreated {
		t.Fatalf("retry after the 5xx: %d", a.status)
	}
	if got := f.charges("o-5xx"); got != 1 {
		t.Fatalf("charges after the retry = %d, want 1", got)
	}

	a = post(t, srv.URL, "k-4xx", order{ID: "o-4xx"})
	if a.status != http.StatusPaymentRequired || a.header.Get(idempotency.RecordedHeader) != "" {
		t.Fatalf("final 4xx answered %d %v", a.status, a.header)
	}
	replay := post(t, srv.URL, "k-4xx", order{ID: "o-4xx"})
	if replay.status != http.StatusPaymentRequired || replay.header.Get(idempotency.ReplayedHeader) != "true" || string(replay.body) != string(a.body) {
		t.Fatalf("the recorded 4xx replayed as %d %v %q", replay.status, replay.header, replay.body)
	}
	if got := f.charges("o-4xx"); got != 1 {
		t.Fatalf("a recorded 4xx's rows = %d, want 1 (committed with its response)", got)
	}
}

// TestTxSerializationFailuresAndDeadlocksRollBackAndRunOnce: under
// SERIALIZABLE, handlers that read what others write fail with 40001,
// and handlers that lock two rows in opposite orders with 40P01; each
// such run rolls back and frees its key, httpretry's retry runs it again,
// and every order ends charged exactly once.
func TestTxSerializationFailuresAndDeadlocksRollBackAndRunOnce(t *testing.T) {
	f := newFixture(t, Options{TxOptions: pgx.TxOptions{IsoLevel: pgx.Serializable}}, false)
	ctx := context.Background()
	if _, err := f.direct.Exec(ctx, "CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL); INSERT INTO accounts VALUES (1, 0), (2, 0)"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	codes := map[string]int{}
	gate := make(chan struct{})
	var arrived sync.WaitGroup
	arrived.Add(2)
	var gateOnce sync.Once
	gated := map[string]bool{}
	srv := f.serve(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := idempotency.TxFrom[pgx.Tx](r.Context())
		var o order
		_ = decode(r, &o)
		// Both read the sum of charges (a predicate the other writes),
		// and lock the two accounts in an order of their own.
		first, second := 1, 2
		if o.Amount%2 == 0 {
			first, second = 2, 1
		}
		var sum int
		err := tx.QueryRow(r.Context(), "SELECT coalesce(sum(amount), 0) FROM charges").Scan(&sum)
		if err == nil {
			_, err = tx.Exec(r.Context(), "UPDATE accounts SET balance = balance + 1 WHERE id = $1", first)
		}
		mu.Lock()
		gate1 := !gated[o.ID]
		gated[o.ID] = true
		mu.Unlock()
		if gate1 {
			gateOnce.Do(func() { go func() { arrived.Wait(); close(gate) }() })
			arrived.Done()
			<-gate
		}
		if err == nil {
			_, err = tx.Exec(r.Context(), "UPDATE accounts SET balance = balance + 1 WHERE id = $1", second)
		}
		if err == nil {
			_, err = tx.Exec(r.Context(), "INSERT INTO charges (order_id, amount) VALUES ($1, $2)", o.ID, o.Amount+sum)
		}
		if err != nil {
			mu.Lock()
			codes[pgCode(err)]++
			mu.Unlock()
			dbError(w, err)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}, idempotency.Options{})
	client := &http.Client{Transport: &httpretry.Transport{MaxAttempts: 10, Timeout: 30 * time.Second}}
	var wg sync.WaitGroup
	statuses := make([]int, 2)
	for i, id := range []string{"o-a", "o-b"} {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, srv.URL, jsonBody(order{ID: id, Amount: i}))
			req.Header.Set("Idempotency-Key", "k-"+id)
			resp, err := client.Do(req)
			if err != nil {
				t.Errorf("%s: %v", id, err)
				return
			}
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		})
	}
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusCreated {
			t.Errorf("order %d answered %d, want 201 after retries", i, s)
		}
	}
	if codes["40001"]+codes["40P01"] == 0 {
		t.Fatalf("no serialization failure or deadlock happened (errors %v): the test did not test", codes)
	}
	for _, id := range []string{"o-a", "o-b"} {
		if got := f.charges(id); got != 1 {
			t.Errorf("%s charged %d times, want 1 (errors %v)", id, got, codes)
		}
	}
	if all, done := f.records(); all != 2 || done != 2 {
		t.Fatalf("records = %d (%d completed), want 2 completed", all, done)
	}
}

// TestTxIdleInTransactionTimeoutRecordsNothing: a handler that idles in
// its transaction past idle_in_transaction_session_timeout loses the
// transaction with its session; nothing is recorded or charged, the key
// is free, and a retry charges once.
func TestTxIdleInTransactionTimeoutRecordsNothing(t *testing.T) {
	f := newFixture(t, Options{}, false, func(c *pgxpool.Config) {
		c.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = "200"
	})
	var mu sync.Mutex
	idle := true
	srv := f.serve(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := idempotency.TxFrom[pgx.Tx](r.Context())
		var o order
		_ = decode(r, &o)
		if _, err := tx.Exec(r.Context(), "INSERT INTO charges (order_id, amount) VALUES ($1, 1)", o.ID); err != nil {
			dbError(w, err)
			return
		}
		mu.Lock()
		wait := idle
		idle = false
		mu.Unlock()
		if wait {
			time.Sleep(time.Second) // the server ends the session meanwhile
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, "charged")
	}, idempotency.Options{})
	a := post(t, srv.URL, "k-idle", order{ID: "o-idle"})
	if a.status != http.StatusServiceUnavailable {
		t.Fatalf("idle transaction answered %d %q, want 503 (nothing committed)", a.status, a.body)
	}
	if got := f.charges("o-idle"); got != 0 {
		t.Fatalf("charges = %d after the session ended, want 0", got)
	}
	if all, _ := f.records(); all != 0 {
		t.Fatalf("records = %d, want the key released", all)
	}
	if a := post(t, srv.URL, "k-idle", order{ID: "o-idle"}); a.status != http.StatusCreated {
		t.Fatalf("retry: %d %q", a.status, a.body)
	}
	if got := f.charges("o-idle"); got != 1 {
		t.Fatalf("charges = %d, want 1", got)
	}
}

// TestTxClientGoneMidQueryIsNeverRecordedAsSuccess: the client leaves
// while the handler's query runs; the query is canceled with the
// request's context, and the handler returns without answering. Nothing
// is recorded (never an empty 200), nothing charged, and the key is
// free.
func TestTxClientGoneMidQueryIsNeverRecordedAsSuccess(t *testing.T) {
	f := newFixture(t, Options{}, false)
	started := make(chan struct{}, 1)
	returned := make(chan error, 1)
	var runs sync.Mutex
	ran := false
	srv := f.serve(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := idempotency.TxFrom[pgx.Tx](r.Context())
		_, err := tx.Exec(r.Context(), "INSERT INTO charges (order_id, amount) VALUES ('o-gone', 1)")
		runs.Lock()
		first := !ran
		ran = true
		runs.Unlock()
		if !first {
			w.WriteHeader(http.StatusCreated)
			return
		}
		started <- struct{}{}
		if err == nil {
			_, err = tx.Exec(r.Context(), "SELECT pg_sleep(30)")
		}
		returned <- err
		// The handler returns without writing: its client is gone.
	}, idempotency.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; time.Sleep(100 * time.Millisecond); cancel() }()
	if _, err := tryPost(ctx, srv.URL, "k-gone", order{ID: "o-gone"}); err == nil {
		t.Fatal("the canceled request got an answer")
	}
	select {
	case err := <-returned:
		if err == nil {
			t.Fatal("the query was not canceled with the request")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the handler's query ran on after its client left")
	}
	waitFor(t, 10*time.Second, "the key was never released", func() bool {
		all, _ := f.records()
		return all == 0
	})
	if got := f.charges("o-gone"); got != 0 {
		t.Fatalf("charges = %d, want 0", got)
	}
	a := post(t, srv.URL, "k-gone", order{ID: "o-gone"})
	if a.status != http.StatusCreated || a.header.Get(idempotency.ReplayedHeader) != "" {
		t.Fatalf("the retry of an abandoned request answered %d %v %q, want a new run's 201", a.status, a.header, a.body)
	}
	if got := f.charges("o-gone"); got != 1 {
		t.Fatalf("charges = %d, want 1", got)
	}
}

func pgCode(err error) string {
	if code := sqlState(err); code != "" {
		return code
	}
	return "other"
}
