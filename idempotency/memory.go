package idempotency

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Defaults for the zero values of MemoryOptions' fields.
const (
	DefaultMaxEntries = 100_000
	DefaultMaxBytes   = 64 << 20 // 64 MiB
)

// MemoryOptions configures [NewMemoryStore]. The zero value is ready to
// use.
type MemoryOptions struct {
	// MaxEntries bounds the number of keys held: reservations in progress
	// and recorded responses. 0 (or negative) means 100,000.
	//
	// Since recorded responses are kept for their whole TTL, it bounds the
	// sustained rate of new keys too: MaxEntries per ResponseTTL, about
	// 1.2 keys a second with the defaults (100,000 per 24 hours). Beyond
	// it, new keys are refused (503) as often as needed to stay within it.
	// Size MaxEntries and MaxBytes for your peak rate times ResponseTTL.
	MaxEntries int

	// MaxBytes bounds the bytes held: every key and fingerprint, and every
	// recorded response's body, header names and values. 0 (or negative)
	// means 64 MiB.
	MaxBytes int64

	// EvictResponses lets the store evict live recorded responses, those
	// closest to expiry first, to admit new keys when it is full. The
	// evicted keys' retries then run their operations again, although
	// within their response TTL: trade that only where a new key matters
	// more than an old replay. If false, a recorded response is kept for
	// its whole TTL, and a new key that does not fit is refused
	// ([ErrStoreFull]; the Handler answers 503 with Retry-After).
	EvictResponses bool

	// Clock tells the time for lock and response expiry. If nil, the real
	// clock; tests set a [clockwork.FakeClock].
	Clock clockwork.Clock
}

// MemoryStore is a [Store] held in the memory of one process: use it for a
// single instance, or in tests. A service with several instances needs a
// shared store, or a retry reaching another instance runs the operation
// again.
//
// It is bounded by entries and bytes. When a new record does not fit, it
// evicts what no longer counts: expired responses, and reservations whose
// lock has expired (their owners get [ErrStaleToken]). It never evicts a
// recorded response within its TTL (unless [MemoryOptions.EvictResponses]
// says so) nor a reservation whose lock is live: when the record still
// does not fit, Reserve of a new key and Complete return [ErrStoreFull]
// and evict nothing. The Handler then answers 503 with Retry-After, or
// sends the response unrecorded and frees its key. A response larger than
// MaxBytes is never recorded.
//
// Expired records are removed lazily, when looked up or when room is
// needed; there is no background goroutine and nothing to close.
//
// Create one with NewMemoryStore. A MemoryStore is safe for concurrent use
// by multiple goroutines.
type MemoryStore struct {
	clock          clockwork.Clock
	maxEntries     int
	maxBytes       int64
	evictResponses bool

	mu        sync.Mutex // protects the fields below
	entries   map[string]*memoryEntry
	locks     entryHeap // reservations, earliest lock deadline first
	responses entryHeap // recorded responses, earliest expiry first
	bytes     int64     // sum of the entries' sizes
	lastToken Token     // store-wide, so tokens never repeat for any key
}

// memoryEntry is one key's record.
type memoryEntry struct {
	key         string
	fingerprint string
	token       Token
	done        bool      // a recorded response, not a reservation
	deadline    time.Time // lock deadline, or the response's expiry when done
	resp        *Response
	size        int64
	index       int // position in locks or responses
}

// NewMemoryStore returns an empty MemoryStore bounded as opts says.
func NewMemoryStore(opts MemoryOptions) *MemoryStore {
	s := &MemoryStore{
		clock:          opts.Clock,
		maxEntries:     opts.MaxEntries,
		maxBytes:       opts.MaxBytes,
		evictResponses: opts.EvictResponses,
		entries:        make(map[string]*memoryEntry),
	}
	if s.clock == nil {
		s.clock = clockwork.NewRealClock()
	}
	if s.maxEntries <= 0 {
		s.maxEntries = DefaultMaxEntries
	}
	if s.maxBytes <= 0 {
		s.maxBytes = DefaultMaxBytes
	}
	return s
}

// errNonPositiveTTL rejects a lock or response TTL that would make a record
// expire at once.
var errNonPositiveTTL = errors.New("idempotency: TTL must be positive")

// Reserve implements [Store].
func (s *MemoryStore) Reserve(_ context.Context, key, fingerprint string, lockTTL time.Duration) (Reservation, error) {
	if lockTTL <= 0 {
		return Reservation{}, errNonPositiveTTL
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	e := s.entries[key]
	if e != nil && e.done && !now.Before(e.deadline) {
		s.remove(e)
		e = nil
	}
	switch {
	case e == nil:
		e = &memoryEntry{key: key, fingerprint: fingerprint, size: int64(len(key) + len(fingerprint))}
		if e.size > s.maxBytes || !s.makeRoom(now, 1, e.size) {
			return Reservation{}, ErrStoreFull
		}
		e.token = s.nextToken()
		e.deadline = now.Add(lockTTL)
		s.entries[key] = e
		s.bytes += e.size
		heap.Push(&s.locks, e)
		return Reservation{State: StateReserved, Token: e.token}, nil
	case e.fingerprint != fingerprint:
		return Reservation{State: StateMismatch}, nil
	case e.done:
		return Reservation{State: StateCompleted, Response: e.resp.Clone()}, nil
	case now.Before(e.deadline):
		return Reservation{State: StateInProgress}, nil
	}
	// The owner's lock expired: take over with a new token, so that the
	// old owner's Complete and Release fail.
	e.token = s.nextToken()
	e.deadline = now.Add(lockTTL)
	heap.Fix(&s.locks, e.index)
	return Reservation{State: StateReserved, Token: e.token, TookOver: true}, nil
}

// Complete implements [Store]. The owner of an expired lock that no one
// has taken over may still complete.
func (s *MemoryStore) Complete(_ context.Context, key string, token Token, resp *Response, ttl time.Duration) error {
	if ttl <= 0 {
		return errNonPositiveTTL
	}
	if resp == nil {
		return errors.New("idempotency: Complete with a nil response")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.owned(key, token)
	if e == nil {
		return ErrStaleToken
	}
	size := int64(len(key)+len(e.fingerprint)) + resp.Size()
	if size > s.maxBytes {
		return ErrStoreFull
	}
	// Take the reservation out while making room, so that it cannot be
	// evicted for its own response.
	heap.Remove(&s.locks, e.index)
	s.bytes -= e.size
	now := s.clock.Now()
	if !s.makeRoom(now, 0, size) {
		s.bytes += e.size
		heap.Push(&s.locks, e)
		return ErrStoreFull
	}
	e.done = true
	e.resp = resp.Clone()
	e.deadline = now.Add(ttl)
	e.size = size
	s.bytes += size
	heap.Push(&s.responses, e)
	return nil
}

// Release implements [Store].
func (s *MemoryStore) Release(_ context.Context, key string, token Token) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.owned(key, token)
	if e == nil {
		return ErrStaleToken
	}
	s.remove(e)
	return nil
}

// owned returns the reservation of key that token owns, or nil. s.mu must
// be held.
func (s *MemoryStore) owned(key string, token Token) *memoryEntry {
	e := s.entries[key]
	if e == nil || e.done || e.token != token || token == 0 {
		return nil
	}
	return e
}

// nextToken issues a token. s.mu must be held.
func (s *MemoryStore) nextToken() Token {
	s.lastToken++
	return s.lastToken
}

// remove deletes e from the store. s.mu must be held.
func (s *MemoryStore) remove(e *memoryEntry) {
	if e.done {
		heap.Remove(&s.responses, e.index)
	} else {
		heap.Remove(&s.locks, e.index)
	}
	delete(s.entries, e.key)
	s.bytes -= e.size
}

// makeRoom evicts records until n more entries of size more bytes fit, and
// reports whether they do. When they do not, it puts back what it evicted:
// a failed call changes nothing. s.mu must be held.
func (s *MemoryStore) makeRoom(now time.Time, n int, size int64) bool {
	var evicted []*memoryEntry
	for len(s.entries)+n > s.maxEntries || s.bytes+size > s.maxBytes {
		e := s.evictable(now)
		if e == nil {
			for _, e := range evicted {
				s.restore(e)
			}
			return false
		}
		s.remove(e)
		evicted = append(evicted, e)
	}
	return true
}

// restore puts back an entry remove took out. s.mu must be held.
func (s *MemoryStore) restore(e *memoryEntry) {
	s.entries[e.key] = e
	s.bytes += e.size
	if e.done {
		heap.Push(&s.responses, e)
	} else {
		heap.Push(&s.locks, e)
	}
}

// evictable returns the next record to evict, or nil: an expired response,
// a reservation whose lock expired, then, only with evictResponses, the
// response closest to expiry. s.mu must be held.
func (s *MemoryStore) evictable(now time.Time) *memoryEntry {
	switch {
	case len(s.responses) > 0 && !now.Before(s.responses[0].deadline):
		return s.responses[0] // expired
	case len(s.locks) > 0 && !now.Before(s.locks[0].deadline):
		return s.locks[0] // its owner is gone or too slow
	case s.evictResponses && len(s.responses) > 0:
		return s.responses[0] // closest to expiry
	}
	return nil
}

// entryHeap orders entries by deadline, earliest first, for
// [container/heap].
type entryHeap []*memoryEntry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h entryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *entryHeap) Push(x any) {
	e := x.(*memoryEntry)
	e.index = len(*h)
	*h = append(*h, e)
}

func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
