package redisretry

import (
	"testing"
	"time"
)

func TestReplayable(t *testing.T) {
	t.Parallel()
	start := time.Unix(1000, 0)
	ttl := 10 * time.Second
	tests := []struct {
		name string
		now  time.Time
		want bool
	}{
		{"at once", start, true},
		{"within the nonce's life", start.Add(ttl - time.Nanosecond), true},
		{"when the nonce may have expired", start.Add(ttl), false},
		{"long after", start.Add(time.Hour), false},
		{"a clock that went back knows no age", start.Add(-time.Nanosecond), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := replayable(start, tt.now, ttl); got != tt.want {
				t.Errorf("replayable(start, start%+v, %v) = %v; want %v", tt.now.Sub(start), ttl, got, tt.want)
			}
		})
	}
}
