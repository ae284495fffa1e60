package httpretry

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// TestAlarmHeapBoundedByOperationsWaitingWithUnlikeDelays: the alarms of
// every Transport on the system clock share one heap; an operation that
// answered before its delay must not stay on it, holding its hedging
// state, for as long as its delay, only because operations of another
// Transport with a shorter delay keep arriving. Transport L (delay one
// minute) runs 5000 operations answered at once while Transport S (delay
// 5ms, answered after about 1ms: some are always waiting) runs on eight
// goroutines. Once L's operations all ended, the heap
// should hold about as many entries as operations are waiting (S.s eight),
// not one per L operation.
func TestAlarmHeapBoundedByOperationsWaitingWithUnlikeDelays(t *testing.T) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var waiting atomic.Int32
	short := &Transport{Budget: Unlimited, Hedging: &Hedging{Delay: 5 * time.Millisecond},
		Base: roundTripFunc(func(req *http.Request) (*http.Response, error) {
			select {
			case <-time.After(time.Millisecond):
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
			return response(req, 200, "ok"), nil
		})}
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				waiting.Add(1)
				req, _ := http.NewRequest("GET", "https://short.test/", nil)
				resp, err := short.RoundTrip(req)
				waiting.Add(-1)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(20 * time.Millisecond)

	long := &Transport{Budget: Unlimited, Hedging: &Hedging{Delay: time.Minute},
		Base: roundTripFunc(func(req *http.Request) (*http.Response, error) { return response(req, 200, "ok"), nil })}
	const ops = 5000
	for i := 0; i < ops; i++ {
		req, _ := http.NewRequest("GET", "https://long.test/", nil)
		resp, err := long.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if i%100 == 0 {
			time.Sleep(time.Millisecond) // let S's alarms ring meanwhile
		}
	}
	time.Sleep(50 * time.Millisecond) // S's operations of the while are done
	n := hedgeAlarms.Len()
	if n > 100 {
		t.Errorf("heap holds %d entries once the %d operations of the one-minute delay ended (about %d operations waiting); each keeps its hedging state (%d bytes) until its minute is up",
			n, ops, waiting.Load(), unsafe.Sizeof(hedged{}))
	}
}
