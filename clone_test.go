package httpretry

import (
	"context"
	"log/slog"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// TestCloneCopiesEveryField sets every exported field of a Transport to a
// value that is not its zero value, so that a field added to Transport
// and forgotten by Clone fails here.
func TestCloneCopiesEveryField(t *testing.T) {
	orig := &Transport{}
	v := reflect.ValueOf(orig).Elem()
	for i := range v.NumField() {
		f, sf := v.Field(i), v.Type().Field(i)
		if !sf.IsExported() {
			continue
		}
		switch sf.Name {
		case "Base":
			f.Set(reflect.ValueOf(http.RoundTripper(http.DefaultTransport)))
		case "Budget":
			f.Set(reflect.ValueOf(Budget(NewTokenBucket(3, 0.5))))
		case "Clock":
			f.Set(reflect.ValueOf(clockwork.Clock(clockwork.NewFakeClock())))
		case "Throttle":
			f.Set(reflect.ValueOf(&throttle.Throttle{K: 3}))
		case "Logger":
			f.Set(reflect.ValueOf(slog.New(slog.DiscardHandler)))
		case "Hedging":
			f.Set(reflect.ValueOf(&Hedging{Delay: time.Millisecond}))
		case "LearnAttemptTimeout":
			f.Set(reflect.ValueOf(&LearnedTimeout{Factor: 2}))
		default:
			switch f.Kind() {
			case reflect.Int, reflect.Int64:
				f.SetInt(int64(i + 1))
			case reflect.Bool:
				f.SetBool(true)
			case reflect.Func:
				f.Set(reflect.MakeFunc(f.Type(), func([]reflect.Value) []reflect.Value {
					out := make([]reflect.Value, f.Type().NumOut())
					for j := range out {
						out[j] = reflect.Zero(f.Type().Out(j))
					}
					return out
				}))
			default:
				t.Fatalf("field %s of kind %s: give it a value in this test", sf.Name, f.Kind())
			}
		}
	}
	c := reflect.ValueOf(orig.Clone()).Elem()
	for i := range v.NumField() {
		sf := v.Type().Field(i)
		if !sf.IsExported() {
			continue
		}
		got, want := c.Field(i), v.Field(i)
		if got.IsZero() {
			t.Errorf("Clone left %s zero", sf.Name)
			continue
		}
		if want.Kind() == reflect.Func {
			if got.Pointer() != want.Pointer() {
				t.Errorf("Clone().%s is another function", sf.Name)
			}
			continue
		}
		if !got.Equal(want) {
			t.Errorf("Clone().%s = %v, want %v", sf.Name, got, want)
		}
	}
}

// TestCloneSharesTheDefaults: a Transport with nil Base and Budget and its
// clone use one connection pool and one budget.
func TestCloneSharesTheDefaults(t *testing.T) {
	orig := &Transport{}
	c := orig.Clone()
	if c.Base != nil || c.Budget != nil {
		t.Fatalf("Clone set Base %v, Budget %v; want them nil, as in the original", c.Base, c.Budget)
	}
	if c.base() != orig.base() {
		t.Error("the clone has a connection pool of its own")
	}
	if c.EffectiveBudget() != orig.EffectiveBudget() {
		t.Error("the clone has a budget of its own")
	}
	c.OnDone = func(*http.Request, Outcome) {}
	if orig.OnDone != nil {
		t.Error("setting the clone's OnDone changed the original's")
	}
}

// TestCloneLearnsIntoTheOriginalsLatencies: a clone of a Transport that
// learns latencies learns into the same set: the hedge delay of a host
// only the clone sent to is the original's too.
func TestCloneLearnsIntoTheOriginalsLatencies(t *testing.T) {
	t.Parallel()
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
	tr := &Transport{Base: base, Clock: clockwork.NewFakeClock(), Hedging: &Hedging{MinSamples: 10}}
	if _, ok := tr.HedgeDelay("api.test"); ok {
		t.Fatal("a hedge delay before any latency was learned")
	}
	c := tr.Clone()
	for range 10 {
		resp, err := c.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/items", nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if d, ok := tr.HedgeDelay("api.test"); !ok || d != time.Millisecond {
		t.Errorf("the original's hedge delay after 10 answers through its clone: %v, %v; want 1ms (the floor), true", d, ok)
	}
}
