package spread

import "testing"

// draws returns an intn that answers ks in turn (each taken modulo n).
func draws(ks ...int) func(int) int {
	return func(n int) int {
		k := ks[0]
		ks = ks[1:]
		return k % n
	}
}

// TestPickPrefersAnUntriedHealthyAddressThenFewerInFlight holds the
// order of the tiers and the power of two choices within one.
func TestPickPrefersAnUntriedHealthyAddressThenFewerInFlight(t *testing.T) {
	tests := []struct {
		name  string
		cs    []choice
		draws []int
		want  int
	}{
		{"none", nil, nil, -1},
		{"one", []choice{{}}, []int{0}, 0},
		{"fewer in flight of the two drawn", []choice{{inFlight: 3}, {inFlight: 1}, {inFlight: 0}}, []int{0, 0}, 1},
		{"first drawn on a tie", []choice{{}, {}, {}}, []int{2, 0}, 2},
		{"second draw skips the first", []choice{{inFlight: 2}, {inFlight: 5}, {inFlight: 1}}, []int{1, 1}, 2},
		{"untried before tried, whatever in flight", []choice{{tried: true}, {inFlight: 9}}, []int{0}, 1},
		{"tried healthy before untried ejected", []choice{{tried: true}, {ejected: true}}, []int{0}, 0},
		{"all tried: any healthy", []choice{{tried: true, inFlight: 1}, {tried: true}}, []int{0, 0}, 1},
		{"all ejected: untried first", []choice{{ejected: true, tried: true}, {ejected: true}}, []int{0}, 1},
		{"only the healthy ones are drawn", []choice{{ejected: true}, {inFlight: 4}, {ejected: true}, {inFlight: 2}}, []int{0, 0}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pick(tt.cs, draws(tt.draws...)); got != tt.want {
				t.Errorf("pick = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestPickDrawsEveryAddressOfTheTier: with nothing in flight, every
// address of four is picked for some draw.
func TestPickDrawsEveryAddressOfTheTier(t *testing.T) {
	cs := make([]choice, 4)
	got := map[int]bool{}
	for k := range 4 {
		got[pick(cs, draws(k, 0))] = true
	}
	if len(got) != 4 {
		t.Fatalf("picked %v, want all four", got)
	}
}
