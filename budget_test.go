package httpretry

import (
	"context"
	"errors"
	"math"
	"net/http"
	"sync"
	"testing"
)

// withdrawAll withdraws until the budget refuses and returns how many
// withdrawals it admitted.
func withdrawAll(t *testing.T, b Budget) int {
	t.Helper()
	n := 0
	for b.Withdraw(context.Background()) {
		n++
		if n > 1_000_000 {
			t.Fatal("budget never ran out")
		}
	}
	return n
}

func TestTokenBucketBurstThenTenth(t *testing.T) {
	t.Parallel()
	// A bucket of capacity 20 that starts full and gains one token per ten
	// initial requests. From full it admits exactly 20 retries.
	b := NewTokenBucket(20, 0.1)
	if got := withdrawAll(t, b); got != 20 {
		t.Fatalf("retries admitted from a full bucket = %d; want 20", got)
	}
	// From a drained bucket, N deposits admit exactly floor(N/10).
	for _, n := range []int{0, 9, 10, 11, 19, 20, 99, 100, 101, 199} {
		b := NewTokenBucket(20, 0.1)
		withdrawAll(t, b)
		for range n {
			b.Deposit()
		}
		if got, want := withdrawAll(t, b), n/10; got != want {
			t.Errorf("after %d deposits into a drained bucket: %d retries; want %d", n, got, want)
		}
	}
}

func TestTokenBucketAtMostCapacityPlusDeposits(t *testing.T) {
	t.Parallel()
	// With N deposits interleaved from full, at most C + floor(N·r)
	// retries; overflow at the cap makes it fewer.
	b := NewTokenBucket(20, 0.1)
	admitted := 0
	const n = 1000
	for i := range n {
		b.Deposit()
		if i%3 == 0 && b.Withdraw(context.Background()) {
			admitted++
		}
	}
	admitted += withdrawAll(t, b)
	if admitted > 20+n/10 {
		t.Errorf("admitted %d; want at most %d", admitted, 20+n/10)
	}
	// Deposits into a full bucket are lost: 200 deposits into a full
	// bucket, then draining, gives only the capacity.
	full := NewTokenBucket(20, 0.1)
	for range 200 {
		full.Deposit()
	}
	if got := withdrawAll(t, full); got != 20 {
		t.Errorf("full bucket after 200 deposits admitted %d; want 20 (capped)", got)
	}
}

func TestNewTokenBucketBadInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		capacity, per float64
		deposits      int
		want          int // retries admitted after the deposits, from new
	}{
		{"zero capacity admits nothing", 0, 0.1, 100, 0},
		{"negative capacity admits nothing", -5, 1, 100, 0},
		{"NaN capacity admits nothing", math.NaN(), 1, 100, 0},
		{"negative rate never refills", 2, -1, 100, 2},
		{"NaN rate never refills", 2, math.NaN(), 100, 2},
		{"rate above capacity fills", 3, 10, 0, 3},
		{"fractional capacity rounds down to whole tokens", 2.5, 0, 0, 2},
		{"infinite capacity is clamped", math.Inf(1), 0, 0, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := NewTokenBucket(tt.capacity, tt.per)
			for range tt.deposits {
				b.Deposit()
			}
			if tt.want < 0 {
				if b.Tokens() < 1e12 {
					t.Errorf("Tokens() = %v; want a huge clamped capacity", b.Tokens())
				}
				return
			}
			// Drain, then check refills: deposits after draining.
			if got := withdrawAll(t, b); got != tt.want {
				t.Errorf("admitted %d; want %d", got, tt.want)
			}
		})
	}
	// A rate above capacity refills a drained bucket in one deposit.
	b := NewTokenBucket(3, 10)
	withdrawAll(t, b)
	b.Deposit()
	if got := withdrawAll(t, b); got != 3 {
		t.Errorf("after one deposit of a rate above capacity: %d; want 3", got)
	}
}

func TestTokenBucketZeroValue(t *testing.T) {
	t.Parallel()
	var b TokenBucket
	b.Deposit()
	if b.Withdraw(context.Background()) {
		t.Error("zero TokenBucket admitted a retry")
	}
}

func TestTokenBucketConcurrent(t *testing.T) {
	t.Parallel()
	// 8 goroutines × 1000 deposits at 0.1 from empty must admit exactly
	// 800 retries in all, however the operations interleave.
	b := NewTokenBucket(1000, 0.1)
	withdrawAll(t, b)
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for range 8 {
		wg.Go(func() {
			n := 0
			for range 1000 {
				b.Deposit()
				if b.Withdraw(context.Background()) {
					n++
				}
			}
			mu.Lock()
			admitted += n
			mu.Unlock()
		})
	}
	wg.Wait()
	admitted += withdrawAll(t, b)
	if admitted != 800 {
		t.Errorf("admitted %d; want exactly 800", admitted)
	}
}

func TestUnlimited(t *testing.T) {
	t.Parallel()
	for range 1000 {
		if !Unlimited.Withdraw(context.Background()) {
			t.Fatal("Unlimited refused a retry")
		}
	}
	Unlimited.Deposit()
}

// TestMaxTokensLeavesRoom: the largest capacity, in units, plus a deposit
// of the same size still fits in an int64.
func TestMaxTokensLeavesRoom(t *testing.T) {
	t.Parallel()
	const units = maxTokens * tokenUnit
	if units > math.MaxInt64/2 || units < math.MaxInt64/2-tokenUnit {
		t.Errorf("maxTokens·tokenUnit = %d; want just under MaxInt64/2 = %d", int64(units), int64(math.MaxInt64/2))
	}
	// The largest bucket, with the largest rate, refills without
	// wrapping around.
	b := NewTokenBucket(math.Inf(1), math.Inf(1))
	full := b.Tokens()
	if full < maxTokens*0.999999 || full > maxTokens*1.000001 {
		t.Fatalf("Tokens() = %v; want about %d", full, maxTokens)
	}
	if !b.Withdraw(context.Background()) {
		t.Fatal("the largest bucket refused a retry")
	}
	b.Deposit()
	if got := b.Tokens(); got != full {
		t.Errorf("after a withdrawal and a deposit: %v tokens; want %v", got, full)
	}
}

// TestBudgetTokenNotSpentWithoutRetry: a retry is decided, and its token
// withdrawn, before the discarded response is drained; when the drain
// (up to drainTimeout of real time) leaves too little time, the retry
// never starts (deadline_exhausted) and its token comes back. On a machine
// so busy that the decision itself comes late, the operation stops at the
// decision without a token: the same outcome.
func TestBudgetTokenNotSpentWithoutRetry(t *testing.T) {
	realTime(t)
	t.Parallel()
	budget := NewTokenBucket(1, 0)
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		// A body that never ends: the drain gives up after drainTimeout.
		return &http.Response{StatusCode: 503, Header: http.Header{}, Body: &stallBody{closed: make(chan struct{})},
			ContentLength: -1, Request: r}, nil
	})
	// At the decision 150ms may be waited (250ms left, less 100ms); the
	// wait is 0, so the retry is decided. The drain then takes 200ms.
	tr := &Transport{Base: base, Timeout: 250 * ms, MinAttemptTime: 100 * ms, Jitter: noJitter, Budget: budget}
	var o Outcome
	_, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://api.test/", nil))
	var e *Error
	if !errors.As(err, &e) || o.Attempts != 1 || o.Reason != DeadlineExhausted {
		t.Fatalf("err = %v, outcome %+v; want deadline_exhausted after 1 attempt", err, o)
	}
	if got := budget.Tokens(); got != 1 {
		t.Errorf("tokens = %v; want 1: a retry that never started keeps its token", got)
	}
}

// stallBody is a response body whose Read blocks until Close.
type stallBody struct {
	closed    chan struct{}
	closeOnce sync.Once
}

func (b *stallBody) Read([]byte) (int, error) {
	<-b.closed
	return 0, errors.New("stallBody: closed")
}

func (b *stallBody) Close() error {
	b.closeOnce.Do(func() { close(b.closed) })
	return nil
}
