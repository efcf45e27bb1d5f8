package ddloffload

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A foreground that became ten times slower by itself, with the copy held:
// the throttle measures its baseline again after each latRebase of holding,
// one step (max_latency_pct) at a time, so the job goes on in the end but a
// slow patch never loosens the bar at once. Either measure held the copy
// alone (the statements', or the transactions' with statements as fast as
// before), and only its baseline moved.
func TestThrottleRebaseRisesOneStep(t *testing.T) {
	for _, pct := range []int{150, 100} {
		for slow, what := range []string{"statement", "transaction"} {
			t.Run(fmt.Sprintf("max_latency_pct=%d/%s", pct, what), func(t *testing.T) { testRebase(t, pct, slow) })
		}
	}
}

func testRebase(t *testing.T, pct, slow int) {
	clock := time.Unix(1_000_000, 0)
	now := func() time.Time { return clock }
	p := &Plugin{vars: newVars(Options{Workers: 4, MaxLatencyPct: &pct}), fg: &latencies{now: now}, fgTx: &latencies{now: now}}
	// Baselines at a bucket's upper bound: what the histograms report.
	base := [2]time.Duration{latUpper(latBucket(time.Millisecond)), latUpper(latBucket(20 * time.Millisecond))}
	r := &runner{p: p, log: slog.New(slog.NewTextHandler(io.Discard, nil)), set: Settings{Workers: 4}, fgBase: base}
	th := newThrottle(r)
	bases := []time.Duration{th.sig[slow].base}
	let, why := false, ""
	for range 240 { // a minute of checks
		for range 100 {
			for i, l := range []*latencies{p.fg, p.fgTx} {
				d := base[i]
				if i == slow {
					d *= 10
				}
				l.record(d)
			}
		}
		clock = clock.Add(throttleEvery)
		w := th.latency()
		if w == "" {
			let = true
		} else if why == "" {
			why = w
		}
		if b := bases[len(bases)-1]; th.sig[slow].base != b {
			if th.sig[slow].base > b*time.Duration(max(pct, 150))/100 {
				t.Fatalf("baseline rose from %v to %v at once", b, th.sig[slow].base)
			}
			bases = append(bases, th.sig[slow].base)
		}
	}
	if !strings.Contains(why, "foreground's "+th.sig[slow].what+" p99") {
		t.Errorf("the copy was held because %q; want the %ss named", why, th.sig[slow].what)
	}
	if !let || th.sig[slow].base < 5*base[slow] {
		t.Errorf("the copy was let go: %v; baselines %v", let, bases)
	}
	if len(bases) < 4 {
		t.Errorf("baselines %v: want several steps", bases)
	}
	if other := 1 - slow; th.sig[other].base != base[other] {
		t.Errorf("the %ss' baseline moved from %v to %v, though they were as fast as before", th.sig[other].what, base[other], th.sig[other].base)
	}
}

// Below one worker's share, one worker copies and pauses in between, so
// that it copies that fraction of the time; at two, two copy at once.
func TestThrottlePacesBelowOneWorker(t *testing.T) {
	ctx := context.Background()
	th := &throttle{share: 0.25}
	start := time.Now()
	var copying time.Duration
	for time.Since(start) < 400*time.Millisecond {
		done, err := th.acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c := time.Now()
		time.Sleep(10 * time.Millisecond)
		copying += time.Since(c)
		done()
	}
	if f := float64(copying) / float64(time.Since(start)); f < 0.15 || f > 0.35 {
		t.Errorf("at a share of 0.25 the copy ran %.0f%% of the time", f*100)
	}
	// The live catch-up's batches are not paced: right after a chunk.
	done, err := th.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	done()
	soon, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
	defer cancel()
	if done, err = th.acquireBatch(soon); err != nil {
		t.Fatalf("a catch-up batch waited for the copy's pause: %v", err)
	}
	done()

	th = &throttle{share: 2.5}
	var dones []func()
	for range 2 {
		done, err := th.acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		dones = append(dones, done)
	}
	short, cancel2 := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel2()
	if _, err := th.acquire(short); err == nil {
		t.Error("a share of 2.5 let a third chunk run at once")
	}
	for _, done := range dones {
		done()
	}
	if _, err := th.acquire(ctx); err != nil || !th.notBefore.IsZero() {
		t.Errorf("at a share of 2.5: %v, a pause until %v", err, th.notBefore)
	}
}
