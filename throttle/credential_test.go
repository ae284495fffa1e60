package throttle

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestQuotaIsKeptPerCredentialAndItsNameHoldsNoSecret: a destination
// whose quota is per token (GitHub: 5,000 an hour per token) called with
// two tokens, alice's spent and bob's with 4,997 left. Alice's next call
// is refused, bob's and a call without a credential are admitted, and
// the overload counts stay one for the destination. No key the throttle
// holds, host or credential, contains a token or any part of the
// Authorization or X-Api-Key values.
func TestQuotaIsKeptPerCredentialAndItsNameHoldsNoSecret(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	th := &Throttle{draws: func() float64 { return 1 }}
	req := func(header, value string) *http.Request {
		r, _ := http.NewRequest(http.MethodGet, "https://api.github.test/user", nil)
		if header != "" {
			r.Header.Set(header, value)
		}
		return r
	}
	alice := req("Authorization", "Bearer ghp_aliceSecret0001")
	bob := req("Authorization", "Bearer ghp_bobSecret0002")
	keyed := req("X-Api-Key", "carolSecret0003")
	reset := http.Header{"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Reset": {"1700003000"}, "Date": {now.UTC().Format(http.TimeFormat)}}
	answer := func(r *http.Request, remaining string) {
		h := reset.Clone()
		h.Set("X-Ratelimit-Remaining", remaining)
		th.Record(th.Dest(r), &Result{Status: 200, Header: h, Request: r, Sent: now}, fixedClock(now))
	}
	answer(alice, "0")
	answer(bob, "4997")
	answer(keyed, "10")
	if _, _, err := th.Admit(th.Dest(alice), alice, fixedClock(now)); err != ErrQuotaExhausted {
		t.Errorf("alice with her quota spent: %v; want ErrQuotaExhausted", err)
	}
	for name, r := range map[string]*http.Request{"bob": bob, "an X-Api-Key": keyed, "no credential": req("", "")} {
		if _, _, err := th.Admit(th.Dest(r), r, fixedClock(now)); err != nil {
			t.Errorf("%s: %v; want admitted", name, err)
		}
	}
	if th.Dest(alice).counts != th.Dest(bob).counts || th.Dest(bob).counts != th.Dest(req("", "")).counts {
		t.Error("the credentials' Dests hold counts of their own; want the destination's, one for all")
	}
	keys := th.dests.Keys()
	for _, host := range th.dests.Keys() {
		keys = append(keys, th.dests.Find(host).creds.Keys()...)
	}
	if len(keys) != 4 {
		t.Errorf("keys %q: want the host and three credentials", keys)
	}
	for _, k := range keys {
		for _, secret := range []string{"Bearer", "ghp_", "alice", "bob", "carol", "Secret"} {
			if strings.Contains(k, secret) {
				t.Errorf("key %q holds %q", k, secret)
			}
		}
	}
}

// fixedClock is a Clock that always says t.
type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }
