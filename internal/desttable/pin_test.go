package desttable

import (
	"fmt"
	"testing"
)

// pinVal is a value whose owner pins it: since is when it was pinned, 0
// when it is not.
type pinVal struct{ since int64 }

var pinValSince = func(v *pinVal) int64 { return v.since }

// TestTablePinnedKeyIsNeverTheOneEvicted: a table of 4 keys, one of them
// pinned and never looked up again, then 1,000 other keys added one after
// another: the pinned key is still held, with its value, and every other
// key is evicted in its turn, so the table holds the pinned key and the
// last 3 added. Unpinned, it is evicted by the next sweep that finds it
// unused.
func TestTablePinnedKeyIsNeverTheOneEvicted(t *testing.T) {
	t.Parallel()
	var tb Table[pinVal]
	tb.PinBy(&pinValSince)
	for i := range 4 {
		tb.Get(fmt.Sprint("k", i), 4, nil)
	}
	pinned := tb.Get("k1", 4, nil)
	pinned.since = 7
	for i := range 1000 {
		tb.Get(fmt.Sprint("other", i), 4, nil)
		if tb.Find("k1") != pinned {
			t.Fatalf("after %d other keys: the pinned key was evicted", i+1)
		}
	}
	for i := 997; i < 1000; i++ {
		if tb.Find(fmt.Sprint("other", i)) == nil {
			t.Errorf("other%d, among the last 3 added, is not held", i)
		}
	}
	if n := tb.Len(); n != 4 {
		t.Errorf("Len() = %d; want 4", n)
	}
	pinned.since = 0
	for i := range 4 {
		tb.Get(fmt.Sprint("after", i), 4, nil)
	}
	if tb.Find("k1") != nil {
		t.Errorf("unpinned and unused: still held after 4 other keys")
	}
}

// TestTableFullOfPinnedKeysEvictsTheOldestPinned: when every key is
// pinned, a new key still finds room: the one pinned longest ago is
// evicted, then the next oldest, so the table stays within its bound.
// Used keys that are not pinned go before any pinned one.
func TestTableFullOfPinnedKeysEvictsTheOldestPinned(t *testing.T) {
	t.Parallel()
	var tb Table[pinVal]
	tb.PinBy(&pinValSince)
	since := map[string]int64{"a": 30, "b": 10, "c": 40, "d": 20}
	for _, k := range []string{"a", "b", "c", "d"} {
		tb.Get(k, 4, nil).since = since[k]
	}
	tb.Get("e", 4, nil) // evicts b, pinned at 10
	if tb.Find("b") != nil || tb.Find("e") == nil {
		t.Fatalf("keys %v; want b (pinned longest ago) evicted for e", tb.Keys())
	}
	tb.Get("e", 4, nil) // e used, not pinned
	tb.Get("f", 4, nil) // e goes first: it is not pinned
	if tb.Find("e") != nil || tb.Find("f") == nil {
		t.Fatalf("keys %v; want e (used, not pinned) evicted before any pinned key", tb.Keys())
	}
	tb.Find("f").since = 50
	tb.Get("g", 4, nil) // every key pinned: d, at 20, goes
	if tb.Find("d") != nil || tb.Len() != 4 {
		t.Fatalf("keys %v; want d (pinned at 20) evicted, 4 held", tb.Keys())
	}
}

// TestTableWithoutPinByEvictsAsBefore: a table whose owner names no pin
// evicts by CLOCK alone, whatever its values hold.
func TestTableWithoutPinByEvictsAsBefore(t *testing.T) {
	t.Parallel()
	var tb Table[pinVal]
	for i := range 4 {
		tb.Get(fmt.Sprint("k", i), 4, nil).since = 1
	}
	tb.Get("new", 4, nil)
	if tb.Find("k0") != nil {
		t.Errorf("keys %v; want k0, the first added and not used since, evicted", tb.Keys())
	}
}
