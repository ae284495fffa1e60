package spread

// WaitLookups waits for the lookups in flight of every host of t to end,
// so that a test outside the package sees a refreshed answer applied.
func WaitLookups(t *Transport) {
	t.mu.Lock()
	hosts := make([]*host, 0, len(t.hosts))
	for _, h := range t.hosts {
		hosts = append(hosts, h)
	}
	t.mu.Unlock()
	for _, h := range hosts {
		h.waitLookup()
	}
}
