package ddloffload

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"
)

// A foreground that became ten times slower by itself, with the copy held:
// the throttle measures its baseline again after each latRebase of holding,
// one step (max_latency_pct) at a time, so the job goes on in the end but a
// slow patch never loosens the bar at once.
func TestThrottleRebaseRisesOneStep(t *testing.T) {
	for _, pct := range []int{150, 100} {
		t.Run(fmt.Sprintf("max_latency_pct=%d", pct), func(t *testing.T) { testRebase(t, pct) })
	}
}

func testRebase(t *testing.T, pct int) {
	clock := time.Unix(1_000_000, 0)
	fg := &latencies{now: func() time.Time { return clock }}
	p := &Plugin{vars: newVars(Options{Workers: 4, MaxLatencyPct: &pct}), fg: fg}
	r := &runner{p: p, log: slog.New(slog.NewTextHandler(io.Discard, nil)), set: Settings{Workers: 4}}
	th := &throttle{p: p, r: r, slots: 4, base: time.Millisecond}
	bases := []time.Duration{th.base}
	let := false
	for range 240 { // a minute of checks
		for range 100 {
			fg.record(10 * time.Millisecond)
		}
		clock = clock.Add(throttleEvery)
		if th.latency() == "" {
			let = true
		}
		if b := bases[len(bases)-1]; th.base != b {
			if th.base > b*time.Duration(max(pct, 150))/100 {
				t.Fatalf("baseline rose from %v to %v at once", b, th.base)
			}
			bases = append(bases, th.base)
		}
	}
	if !let || th.base < 5*time.Millisecond {
		t.Errorf("the copy was let go: %v; baselines %v", let, bases)
	}
	if len(bases) < 4 {
		t.Errorf("baselines %v: want several steps", bases)
	}
}
