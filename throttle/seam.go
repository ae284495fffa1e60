package throttle

import "github.com/httpretry/httpretry/internal/throttleseam"

func init() {
	throttleseam.SetDraw = func(th any, draw func() float64) {
		if t, ok := th.(*Throttle); ok {
			t.draws = draw
		}
	}
	throttleseam.Counts = func(th any, key string) (requests, accepts float64) {
		if t, ok := th.(*Throttle); ok {
			return t.counts(key)
		}
		return 0, 0
	}
}
