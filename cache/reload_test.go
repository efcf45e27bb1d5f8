package cache

import (
	"testing"
	"time"
)

func TestLoadBackoff(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		took   time.Duration
		wasted int
		want   time.Duration
	}{
		{30 * ms, 0, 0},
		{30 * ms, 1, 30 * ms},
		{30 * ms, 2, 60 * ms},
		{30 * ms, 3, 120 * ms},
		{30 * ms, 7, 1920 * ms},
		{30 * ms, 8, maxLoadBackoff},
		{30 * ms, 1000, maxLoadBackoff},
		{time.Microsecond, 1, minLoadUnit},
		{5 * time.Second, 1, 5 * time.Second},
		{5 * time.Second, 4, 5 * time.Second},
	} {
		if got := loadBackoff(c.took, c.wasted); got != c.want {
			t.Errorf("loadBackoff(%v, %d) = %v, want %v", c.took, c.wasted, got, c.want)
		}
	}
}
