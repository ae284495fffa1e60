package httpretry

import (
	"context"
	"net/http"
	"testing"

	"github.com/httpretry/httpretry/internal/tried"
)

// markedBase is a Base that chooses among a host's addresses (it embeds
// tried.Marker, as spread.Transport does) and records whether each
// request carried the operation's set of addresses tried.
type markedBase struct {
	tried.Marker
	sets []bool
}

func (b *markedBase) RoundTrip(r *http.Request) (*http.Response, error) {
	b.sets = append(b.sets, tried.From(r.Context()) != nil)
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
}

// TestTriedSetOnlyWhenAnotherAttemptMayFollow: a Base that chooses among
// addresses is given the set of addresses tried when the operation may
// send a second attempt (MaxAttempts 2), and not when it may not
// (MaxAttempts 1): the set costs nothing where no retry could use it. A
// Base that does not choose never gets one.
func TestTriedSetOnlyWhenAnotherAttemptMayFollow(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name        string
		maxAttempts int
		marked      bool
		want        bool
	}{
		{"chooser, two attempts", 2, true, true},
		{"chooser, one attempt", 1, true, false},
		{"plain Base, two attempts", 2, false, false},
	} {
		b := &markedBase{}
		var base http.RoundTripper = b
		if !tt.marked {
			base = roundTripFunc(b.RoundTrip)
		}
		tr := &Transport{Base: base, MaxAttempts: tt.maxAttempts}
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, "http://api.test/", nil))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		resp.Body.Close()
		if len(b.sets) != 1 || b.sets[0] != tt.want {
			t.Errorf("%s: Base saw a tried set %v; want %v", tt.name, b.sets, tt.want)
		}
	}
}
