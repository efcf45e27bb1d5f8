package ddloffload

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// The foreground's latency: how long the statements clients send through
// the proxy take on the backend, and how long their transactions take (see
// Plugin.unitEnded), each kept as histograms per slot of time over the
// last few seconds. A job's throttle compares the copy's effect on it
// with what it was before the job (tableproxy_ddl_max_latency_pct): on a
// backend with few cores the copy competes with the application for CPU and
// I/O, and the proxy sees the application's latency directly, which
// Threads_running only hints at. Recording is a few atomic adds per
// statement; a slot reused for a new period may lose the odd sample to a
// concurrent recorder, which a statistic can afford.

const (
	latSlot     = 100 * time.Millisecond
	latSlots    = 160 // 16 s: the baseline window and the newest window fit
	latLinear   = 16  // microseconds below this are their own bucket
	latSub      = 8   // buckets per power of two above that: 12% apart
	latMaxExp   = 36  // 2^36 µs, 19 hours: anything longer lands in the last bucket
	latBuckets  = latLinear + (latMaxExp-4)*latSub
	latMinCount = 50 // fewer statements in a window say nothing of its p99
)

type latencySlot struct {
	period atomic.Int64 // which latSlot period the counts are of
	n      [latBuckets]atomic.Uint32
}

type latencies struct {
	slots [latSlots]latencySlot
	now   func() time.Time // tests move the clock
}

func newLatencies() *latencies { return &latencies{now: time.Now} }

func latBucket(d time.Duration) int {
	us := uint64(max(d, 0) / time.Microsecond)
	if us < latLinear {
		return int(us)
	}
	e := bits.Len64(us) - 1 // >= 4
	if e >= latMaxExp {
		return latBuckets - 1
	}
	return latLinear + (e-4)*latSub + int(us>>(e-3))&(latSub-1)
}

// latUpper is the largest latency bucket i holds.
func latUpper(i int) time.Duration {
	if i < latLinear {
		return time.Duration(i) * time.Microsecond
	}
	i -= latLinear
	e, m := i/latSub+4, uint64(i%latSub)
	return time.Duration((latSub+m+1)<<(e-3)-1) * time.Microsecond
}

func (l *latencies) record(d time.Duration) {
	period := l.now().UnixNano() / int64(latSlot)
	s := &l.slots[period%latSlots]
	if old := s.period.Load(); old != period && s.period.CompareAndSwap(old, period) {
		for i := range s.n {
			s.n[i].Store(0)
		}
	}
	s.n[latBucket(d)].Add(1)
}

// percentile is the latency that pct percent of the statements in [from,
// to) took at most, and how many statements there were.
func (l *latencies) percentile(from, to time.Time, pct float64) (time.Duration, int) {
	lo, hi := from.UnixNano()/int64(latSlot), to.UnixNano()/int64(latSlot)
	var sum [latBuckets]uint64
	total := uint64(0)
	for i := range l.slots {
		s := &l.slots[i]
		if p := s.period.Load(); p < lo || p >= hi {
			continue
		}
		for b := range s.n {
			c := uint64(s.n[b].Load())
			sum[b] += c
			total += c
		}
	}
	if total == 0 {
		return 0, 0
	}
	want := uint64(float64(total)*pct/100 + 0.5)
	seen := uint64(0)
	for b, c := range sum {
		if seen += c; seen >= want && c > 0 {
			return latUpper(b), int(total)
		}
	}
	return latUpper(latBuckets - 1), int(total)
}
