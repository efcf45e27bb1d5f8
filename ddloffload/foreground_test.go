package ddloffload

import (
	"testing"
	"time"
)

func TestLatencyBuckets(t *testing.T) {
	for _, d := range []time.Duration{0, 5 * time.Microsecond, 15 * time.Microsecond, 16 * time.Microsecond,
		100 * time.Microsecond, 3 * time.Millisecond, 250 * time.Millisecond, 7 * time.Second} {
		b := latBucket(d)
		if up := latUpper(b); up < d || (b > 0 && latUpper(b-1) >= d) {
			t.Errorf("%v: bucket %d holds up to %v, the one below up to %v", d, b, up, latUpper(b-1))
		}
		if up := latUpper(b); float64(up) > float64(d)*1.13+float64(time.Microsecond) {
			t.Errorf("%v: bucket %d is too wide (up to %v)", d, b, up)
		}
	}
	if b := latBucket(100 * time.Hour); b != latBuckets-1 {
		t.Errorf("100h: bucket %d", b)
	}
}

func TestLatencyPercentile(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLatencies()
	l.now = func() time.Time { return now }
	// One second of 1 ms statements, with one in a hundred at 20 ms.
	for i := range 1000 {
		d := time.Millisecond
		if i%100 == 99 {
			d = 20 * time.Millisecond
		}
		l.record(d)
		if i%100 == 99 {
			now = now.Add(100 * time.Millisecond)
		}
	}
	from := time.Unix(1000, 0)
	if p, n := l.percentile(from, now, 99); n != 1000 || p < time.Millisecond || p > 1200*time.Microsecond {
		t.Errorf("p99 = %v of %d, want about 1ms of 1000", p, n)
	}
	if p, _ := l.percentile(from, now, 99.5); p < 20*time.Millisecond || p > 23*time.Millisecond {
		t.Errorf("p99.5 = %v, want about 20ms", p)
	}
	// A slot reused after the ring came round starts empty.
	now = from.Add(latSlots * latSlot)
	l.record(time.Second)
	if p, n := l.percentile(now, now.Add(latSlot), 99); n != 1 || p < time.Second {
		t.Errorf("after a round: p99 %v of %d", p, n)
	}
	if _, n := l.percentile(from, from.Add(time.Second), 99); n != 900 {
		t.Errorf("the reused slot is still counted for its old period: %d statements, want 900", n)
	}
}
