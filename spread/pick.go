package spread

// choice is what pick knows of one of a host's addresses.
type choice struct {
	tried    bool // an earlier attempt of the operation was sent to it
	ejected  bool // it is ejected now
	inFlight int  // attempts sent to it that have not returned
}

// tier orders the addresses an attempt may go to: an address not yet
// tried that is not ejected first; then one that was tried (every healthy
// address was: the operation falls back to any); and an ejected address
// only when every address is ejected or the cap kept none healthy.
func (c choice) tier() int {
	t := 0
	if c.tried {
		t++
	}
	if c.ejected {
		t += 2
	}
	return t
}

// pick returns the index in cs of the address for the next attempt: among
// the addresses of the best tier, the one with fewer attempts in flight of
// two drawn at random (the power of two choices), the first drawn on a tie.
// intn(n) draws from [0, n). It returns -1 when cs is empty.
//
// Two random choices, rather than round robin: an address that has gone
// slow keeps its attempts in flight longer, so it loses most draws and
// gets fewer new attempts while it is slow, without any timer; round robin
// would keep sending it its share. And unlike picking the least loaded
// address outright, two draws do not send every client of a fleet to the
// same address at once.
func pick(cs []choice, intn func(int) int) int {
	best, n := 4, 0
	for _, c := range cs {
		switch t := c.tier(); {
		case t < best:
			best, n = t, 1
		case t == best:
			n++
		}
	}
	if n == 0 {
		return -1
	}
	first := nth(cs, best, intn(n))
	if n == 1 {
		return first
	}
	// A second draw among the other n-1.
	k := intn(n - 1)
	second := nth(cs, best, k)
	if second >= first {
		second = nth(cs, best, k+1)
	}
	if cs[second].inFlight < cs[first].inFlight {
		return second
	}
	return first
}

// nth returns the index in cs of the k-th address (from 0) of tier t.
func nth(cs []choice, t, k int) int {
	for i, c := range cs {
		if c.tier() == t {
			if k == 0 {
				return i
			}
			k--
		}
	}
	return -1
}
