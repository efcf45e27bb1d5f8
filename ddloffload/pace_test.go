package ddloffload

import (
	"math"
	"testing"
	"time"
)

// TestPaceFollowsTheRecentRate: a copy at 1,000 rows/s for a minute, then
// at 4,000: the pace is 1,000 at first, and close to 4,000 some time
// constants after the change, where the average since the start is still
// far below it.
func TestPaceFollowsTheRecentRate(t *testing.T) {
	var p pace
	start := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	rows := int64(0)
	for s := 0; s <= 60; s++ {
		p.sample(start.Add(time.Duration(s)*time.Second), rows)
		rows += 1000
	}
	if got := p.recent(); math.Abs(got-1000) > 1 {
		t.Fatalf("pace %v after a steady minute, want 1000", got)
	}
	for s := 61; s <= 100; s++ {
		rows += 4000
		p.sample(start.Add(time.Duration(s)*time.Second), rows)
	}
	if got, avg := p.recent(), float64(rows)/100; got < 3900 || avg > 2300 {
		t.Errorf("pace %v 40 s after the change (average since the start %v), want about 4000", got, avg)
	}
	// A new run of the copy (a resume restores fewer rows): the pace
	// starts again.
	p.sample(start.Add(101*time.Second), 10)
	if got := p.recent(); got != 0 {
		t.Errorf("pace %v after a restart, want 0 until the next sample", got)
	}
}
