package spread_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/httpretry/httpretry/spread/spreadtest"
)

// errGaveUp is the cause a caller cancels its requests with, as
// errgroup.WithContext does with the group's first error.
var errGaveUp = errors.New("caller gave up")

// TestRequestCanceledWithACauseDoesNotCountAgainstTheAddress: a caller
// cancels its requests with a cause (context.WithCancelCause, as errgroup
// does), while they wait for the headers and while their bodies are
// read. net/http then returns the cause rather than context.Canceled;
// the cancellation is still the caller's doing, and ejects no address.
func TestRequestCanceledWithACauseDoesNotCountAgainstTheAddress(t *testing.T) {
	for _, phase := range []spreadtest.Behaviour{spreadtest.Slow, spreadtest.Trickle} {
		name := map[spreadtest.Behaviour]string{spreadtest.Slow: "before the headers", spreadtest.Trickle: "mid-body"}[phase]
		t.Run(name, func(t *testing.T) {
			g := startGroup(t, spreadtest.Options{Slow: 10 * time.Second})
			for _, b := range g.Backends {
				b.Set(phase)
			}
			sp := newSpread(t, g)
			sp.Clock, sp.EjectAfter = clockwork.NewFakeClock(), 2
			// Twelve requests over four addresses: some address gets
			// three, more than EjectAfter.
			for i := range 12 {
				ctx, cancel := context.WithCancelCause(context.Background())
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.URL, nil)
				if phase == spreadtest.Slow {
					go func() {
						waitFor(t, "the request at a backend", func() bool { return totalRequests(g) == int64(i+1) })
						cancel(errGaveUp)
					}()
					if _, err := sp.RoundTrip(req); !errors.Is(err, errGaveUp) {
						t.Fatalf("request %d: %v, want the caller's cause", i, err)
					}
					continue
				}
				resp, err := sp.RoundTrip(req)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				if _, err := resp.Body.Read(make([]byte, 1)); err != nil {
					t.Fatalf("request %d: first byte: %v", i, err)
				}
				cancel(errGaveUp)
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil {
					t.Fatalf("request %d: the body was read to its end after the cancel", i)
				}
			}
			for _, b := range g.Backends {
				b.Set(spreadtest.Answer)
			}
			everyBackendAnswers(t, sp, g, 200)
		})
	}
}

func totalRequests(g *spreadtest.Group) int64 {
	var n int64
	for _, b := range g.Backends {
		n += b.Requests.Load()
	}
	return n
}
