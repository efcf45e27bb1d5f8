package digest

import (
	"container/list"
	"math/bits"
	"sync"
	"time"

	"tableproxy/cache/eval"
	"tableproxy/plugins"
)

// Key is what a digest row is kept per: the statement's digest, the
// database its unqualified names resolve against, and the proxy user.
type Key struct {
	Digest, Schema, User string
}

// Where a statement was answered.
const (
	atMemory  = iota // by the evaluator, from a cached table
	atResults        // from the result cache
	atBackend        // by the backend
	numWhere
)

// Entry is one digest's figures. The store's lock guards it.
type Entry struct {
	Key
	Text   string // the normalized statement, literals as '?'
	Sample string // the first statement seen, as sent (for planning)
	// Prepared: Sample is a prepared statement's text, with '?' markers.
	Prepared bool
	// Reads and Writes name the tables the statement reads and writes
	// (from its first sighting: every statement of a digest has the same
	// tables).
	Reads, Writes []plugins.TableID

	First, Last           time.Time
	Count, Errors         uint64
	RowsSent, RowsChanged uint64
	Sum, Min, Max         time.Duration
	Where                 [numWhere]uint64
	passes                [eval.NumReasons]uint32
	hist                  histogram

	top  bool          // among the top N by count
	elem *list.Element // its place in the LRU of the others
}

// TopPass is the reason most of the digest's statements the backend
// answered were not answered from memory (eval.NoReason when none).
func (e *Entry) TopPass() eval.PassReason {
	best := eval.NoReason
	for r := range e.passes {
		if e.passes[r] > e.passes[best] || best == eval.NoReason && e.passes[r] > 0 {
			best = eval.PassReason(r)
		}
	}
	return best
}

// P99 is the 99th percentile of the digest's latencies, to the upper
// bound of its histogram bucket (within 1/8 of an octave).
func (e *Entry) P99() time.Duration { return e.hist.quantile(0.99, e.Count, e.Max) }

// histogram counts latencies in buckets of 1/8 octave from 1 µs: 8
// buckets per power of two, so a quantile read off it is within 9%, and
// recording one costs a few instructions and no allocation.
type histogram [histBuckets]uint32

const (
	histSub     = 3 // 2^3 sub-buckets per octave
	histOctaves = 36
	histBuckets = histOctaves << histSub
)

func bucketOf(d time.Duration) int {
	us := uint64(d / time.Microsecond)
	if us < 1<<histSub {
		return int(us) // exact below 8 µs
	}
	oct := bits.Len64(us) - 1 // us in [2^oct, 2^(oct+1))
	sub := int(us>>(oct-histSub)) & (1<<histSub - 1)
	b := (oct-histSub+1)<<histSub + sub
	if b >= histBuckets {
		return histBuckets - 1
	}
	return b
}

// upperOf is the largest latency bucket b holds.
func upperOf(b int) time.Duration {
	if b < 1<<histSub {
		return time.Duration(b+1) * time.Microsecond
	}
	oct := b>>histSub + histSub - 1
	sub := uint64(b & (1<<histSub - 1))
	lo := uint64(1)<<oct + sub<<(oct-histSub)
	return time.Duration(lo+uint64(1)<<(oct-histSub)) * time.Microsecond
}

func (h *histogram) add(d time.Duration) { h[bucketOf(d)]++ }

func (h *histogram) quantile(q float64, n uint64, max time.Duration) time.Duration {
	if n == 0 {
		return 0
	}
	rank := uint64(q*float64(n) + 0.999999)
	var seen uint64
	for b, c := range h {
		seen += uint64(c)
		if seen >= rank {
			if u := upperOf(b); u < max {
				return u
			}
			return max // (never more than the slowest seen)
		}
	}
	return max
}

// Store keeps the digests: the top N by count, and an LRU of at most M
// others, so that its memory is bounded whatever the traffic; a digest of
// the LRU that counts more than the least of the top takes its place.
// One mutex guards it; a statement holds it for a map lookup and a few
// additions.
type Store struct {
	mu      sync.Mutex
	byKey   map[Key]*Entry
	rest    *list.List // LRU of the entries not in the top, most recent first
	top     int        // entries in the top
	minTop  *Entry     // the top's least counted entry, nil when unknown
	maxTop  int
	maxRest int
	since   time.Time // when counting began (start or reset)
	now     func() time.Time
}

// NewStore returns a store of the top n digests and an LRU of m others.
func NewStore(n, m int, now func() time.Time) *Store {
	s := &Store{maxTop: n, maxRest: m, now: now}
	s.resetLocked()
	return s
}

func (s *Store) resetLocked() {
	s.byKey = make(map[Key]*Entry, s.maxTop+s.maxRest)
	s.rest = list.New()
	s.top, s.minTop = 0, nil
	s.since = s.now()
}

// Reset forgets every digest and starts counting afresh.
func (s *Store) Reset() {
	s.mu.Lock()
	s.resetLocked()
	s.mu.Unlock()
}

// Observation is one statement's outcome, as the store counts it.
type Observation struct {
	Duration time.Duration
	Rows     uint64
	Affected uint64
	Err      bool
	Where    int // atMemory, atResults, atBackend, or -1 (the proxy answered it otherwise)
	Pass     eval.PassReason
	At       time.Time
}

// Record counts o for k, and reports false when k is not kept yet: the
// caller then builds the entry (outside the lock) and calls Add.
func (s *Store) Record(k Key, o *Observation) bool {
	s.mu.Lock()
	e, ok := s.byKey[k]
	if ok {
		s.countLocked(e, o)
	}
	s.mu.Unlock()
	return ok
}

// Add keeps e (built by the caller for a key Record did not know) and
// counts o for it; if another statement added the key meanwhile, o is
// counted there.
func (s *Store) Add(e *Entry, o *Observation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if have, ok := s.byKey[e.Key]; ok {
		s.countLocked(have, o)
		return
	}
	e.First, e.Min = o.At, o.Duration
	s.byKey[e.Key] = e
	if s.top < s.maxTop {
		e.top = true
		s.top++
		s.minTop = nil
	} else {
		e.elem = s.rest.PushFront(e)
		for s.rest.Len() > s.maxRest {
			old := s.rest.Remove(s.rest.Back()).(*Entry)
			delete(s.byKey, old.Key)
		}
	}
	s.countLocked(e, o)
}

func (s *Store) countLocked(e *Entry, o *Observation) {
	e.Count++
	e.Last = o.At
	e.Sum += o.Duration
	if o.Duration < e.Min {
		e.Min = o.Duration
	}
	if o.Duration > e.Max {
		e.Max = o.Duration
	}
	e.hist.add(o.Duration)
	e.RowsSent += o.Rows
	e.RowsChanged += o.Affected
	if o.Err {
		e.Errors++
	}
	if o.Where >= 0 {
		e.Where[o.Where]++
		if o.Where == atBackend && o.Pass != eval.NoReason {
			e.passes[o.Pass]++
		}
	}
	if e.top {
		// minTop may no longer be the least once counted: comparing with
		// it stays safe (what overtakes it overtakes the least), and
		// finding the least again costs a scan, so it waits for a swap.
		return
	}
	if e.elem != nil {
		s.rest.MoveToFront(e.elem)
	}
	if s.minTop == nil {
		s.findMinTopLocked()
	}
	if s.minTop != nil && e.Count > s.minTop.Count {
		// e overtakes the top's least: they swap places.
		out := s.minTop
		out.top = false
		out.elem = s.rest.PushFront(out)
		s.rest.Remove(e.elem)
		e.elem, e.top = nil, true
		s.minTop = nil
	}
}

// findMinTopLocked scans the top for its least counted entry; it runs
// only when an entry outside the top is counted and the least is unknown.
func (s *Store) findMinTopLocked() {
	for _, e := range s.byKey {
		if e.top && (s.minTop == nil || e.Count < s.minTop.Count) {
			s.minTop = e
		}
	}
}

// Snapshot copies every entry (without the LRU links) and says since when
// they count.
func (s *Store) Snapshot() ([]Entry, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Entry, 0, len(s.byKey))
	for _, e := range s.byKey {
		c := *e
		c.elem = nil
		out = append(out, c)
	}
	return out, s.since
}

// Len is the number of digests kept.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byKey)
}
