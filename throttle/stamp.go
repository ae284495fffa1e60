package throttle

import "time"

// This file holds how the throttle keeps a time in an atomic integer.

// stampBase is the time stamps count from: this process's start, read
// with the monotonic clock.
var stampBase = time.Now()

// stampOffset keeps every stamp of a time within about 146 years of
// stampBase positive, so that 0 can mean "none".
const stampOffset = int64(1) << 62

// stamp returns t as an integer for an atomic field: nanoseconds since
// stampBase, plus stampOffset. A time read from the system clock carries
// a monotonic reading, and the difference is then taken on the monotonic
// clock: a pause or a reset kept as a stamp lasts as long as it was
// asked to, whatever the wall clock is stepped to meanwhile (an hour
// back would otherwise turn a one-second pause into an hour). A time
// without one (a fake clock's, one built from a date) is placed by its
// wall reading.
func stamp(t time.Time) int64 {
	return int64(t.Sub(stampBase)) + stampOffset
}

// instant returns the time of stamp n, the zero Time for 0. Built from
// stampBase, it carries the monotonic reading stamp took the difference
// on.
func instant(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return stampBase.Add(time.Duration(n - stampOffset))
}

// holds reports whether a pause or a quota window that ends at the stamp
// until still holds at the stamp now: it ends at until, and a request at
// until goes. Every such end is read by this one rule.
func holds(until, now int64) bool { return now < until }
