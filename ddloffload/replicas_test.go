package ddloffload

import (
	"testing"
	"time"
)

// TestReplicaLagGrowsWhileItFallsBehind: the primary commits a transaction
// every tick; the replica applies one every other tick. Read every tick
// and pruned as the throttle does, its lag is the age of the oldest
// transaction it has not applied, growing by half a tick each tick.
// (Pruning once dropped the first mark not reached, so the lag froze at its
// first value while the replica fell 15 s behind.)
func TestReplicaLagGrowsWhileItFallsBehind(t *testing.T) {
	const tick = 250 * time.Millisecond
	start := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	s := &replicaState{conn: nil}
	w := &replicaWatch{states: map[string]*replicaState{"r": s}}
	committedAt := map[uint64]time.Time{}
	for n := uint64(1); n <= 400; n++ {
		now := start.Add(time.Duration(n) * tick)
		committedAt[n] = now
		w.marks = append(w.marks, gtidMark{pos: map[uint64]uint64{0: n}, at: now})
		applied := n / 2
		lag := s.lagFromMarks(w.marks, map[uint64]uint64{0: applied}, now, 0)
		want := now.Sub(committedAt[applied+1]) // the first it lacks
		if lag != want {
			t.Fatalf("tick %d: lag %v, want %v", n, lag, want)
		}
		w.pruneFor([]*replicaState{s})
	}
	if len(w.marks) > 210 {
		t.Errorf("%d marks kept, want those since the oldest the replica lacks (about 200)", len(w.marks))
	}
}

// TestReplicaCaughtUpKeepsTheNewestMark: a replica that has applied
// everything lags 0, and the marks shrink to the newest.
func TestReplicaCaughtUpKeepsTheNewestMark(t *testing.T) {
	start := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	s := &replicaState{}
	w := &replicaWatch{states: map[string]*replicaState{"r": s}}
	for n := uint64(1); n <= 5; n++ {
		w.marks = append(w.marks, gtidMark{pos: map[uint64]uint64{0: n}, at: start.Add(time.Duration(n) * time.Second)})
	}
	if lag := s.lagFromMarks(w.marks, map[uint64]uint64{0: 5}, start.Add(6*time.Second), 0); lag != 0 {
		t.Fatalf("lag %v, want 0", lag)
	}
	w.pruneFor([]*replicaState{s})
	if len(w.marks) != 1 || w.marks[0].pos[0] != 5 {
		t.Errorf("marks %v, want the newest alone", w.marks)
	}
}
