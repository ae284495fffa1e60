package paymentsim

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry/idempotency"
	"github.com/httpretry/httpretry/internal/leakcheck"
)

func TestMain(m *testing.M) {
	leakcheck.Main(m)
}

// The faults are drawn per order and attempt, the same every run, at the
// rates asked for.
func TestFaultsDecide(t *testing.T) {
	f := Faults{Salt: 1, ResetPerMille: 50, DropPerMille: 300, DelayPerMille: 100, SlowPerMille: 20, SlowBy: time.Second}
	const orders, attempts = 20000, 2
	count := map[Fault]int{}
	slow := 0
	for i := range orders {
		for a := 1; a <= attempts; a++ {
			got := f.decide(OrderID(i), a)
			if again := f.decide(OrderID(i), a); again != got {
				t.Fatalf("%s attempt %d: %d, then %d", OrderID(i), a, got, again)
			}
			count[got]++
		}
		if f.Latency(OrderID(i)) == time.Second {
			slow++
		}
	}
	want := map[Fault]float64{Reset: 0.05, Drop: 0.30, Delay: 0.10, Pass: 0.55}
	for fault, rate := range want {
		got := float64(count[fault]) / (orders * attempts)
		if got < rate*0.9 || got > rate*1.1 {
			t.Errorf("fault %d: rate %.4f, want %.2f ±10%%", fault, got, rate)
		}
	}
	if got := float64(slow) / orders; got < 0.018 || got > 0.022 {
		t.Errorf("slow orders: rate %.4f, want 0.02 ±10%%", got)
	}
	other := Faults{Salt: 2, ResetPerMille: 50, DropPerMille: 300, DelayPerMille: 100}
	same := 0
	for i := range 1000 {
		if other.decide(OrderID(i), 1) == f.decide(OrderID(i), 1) {
			same++
		}
	}
	if same == 1000 {
		t.Error("salts 1 and 2 draw the same faults")
	}
}

func TestProviderCounts(t *testing.T) {
	var p Provider
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() { p.Charge(context.Background(), fmt.Sprint(i%50)) })
	}
	wg.Wait()
	if p.Total() != 100 || p.Doubles() != 50 || p.Charges("7") != 2 || p.Charges("none") != 0 {
		t.Fatalf("total %d, doubles %d, charges of 7: %d; want 100, 50, 2", p.Total(), p.Doubles(), p.Charges("7"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	slow := Provider{Latency: func(string) time.Duration { return time.Hour }}
	if id := slow.Charge(ctx, "x"); id != 0 || slow.Total() != 0 {
		t.Fatalf("a canceled slow charge: id %d, total %d; want 0, 0", id, slow.Total())
	}
}

func TestEvents(t *testing.T) {
	var ev Events
	ev.Record(idempotency.Event{Kind: idempotency.KindReplayed})
	ev.Record(idempotency.Event{Kind: idempotency.KindReplayed})
	ev.Record(idempotency.Event{Kind: idempotency.KindExecuted})
	ev.Record(idempotency.Event{Kind: "unknown_kind"})
	if got, want := ev.String(), "executed=1 replayed=2"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	if ev.Count("unknown_kind") != 0 {
		t.Fatal("an unknown kind was counted")
	}
}
