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
// each hold of latRebase copies a chunk or so, and once every hold has found
// it so for latRaiseAfter the throttle measures its baseline again, one
// step (max_latency_pct) at a time, a step a latRaiseAfter at most, so the
// job goes on and a slow patch never loosens the bar at once. Either
// measure held the copy alone (the statements', or the transactions' with
// statements as fast as before), and only its baseline moved.
func TestThrottleRebaseRisesOneStep(t *testing.T) {
	for _, pct := range []int{150, 100} {
		for slow, what := range []string{"statement", "transaction"} {
			t.Run(fmt.Sprintf("max_latency_pct=%d/%s", pct, what), func(t *testing.T) { testRebase(t, pct, slow) })
		}
	}
}

// fakeFg is a foreground on a fake clock for a throttle's latency check.
type fakeFg struct {
	clock time.Time
	p     *Plugin
	r     *runner
	base  [2]time.Duration // the statements' and transactions' p99 before the job
}

func newFakeFg(pct, workers int) *fakeFg {
	f := &fakeFg{clock: time.Unix(1_000_000, 0)}
	now := func() time.Time { return f.clock }
	f.p = &Plugin{vars: newVars(Options{Workers: workers, MaxLatencyPct: &pct}), fg: &latencies{now: now}, fgTx: &latencies{now: now}}
	// Baselines at a bucket's upper bound: what the histograms report.
	f.base = [2]time.Duration{latUpper(latBucket(time.Millisecond)), latUpper(latBucket(20 * time.Millisecond))}
	f.r = &runner{p: f.p, log: slog.New(slog.NewTextHandler(io.Discard, nil)), set: Settings{Workers: workers}, fgBase: f.base,
		rec: &jobRec{job: Job{Start: f.clock}}}
	return f
}

// check records throttleEvery of foreground, each measure at its baseline
// times x, and runs th's latency check.
func (f *fakeFg) check(th *throttle, x [2]float64) string {
	for range 100 {
		for i, l := range []*latencies{f.p.fg, f.p.fgTx} {
			l.record(time.Duration(float64(f.base[i]) * x[i]))
		}
	}
	f.clock = f.clock.Add(throttleEvery)
	return th.latency()
}

func testRebase(t *testing.T, pct, slow int) {
	f := newFakeFg(pct, 4)
	th := newThrottle(f.r)
	bases := []time.Duration{th.sig[slow].base}
	var rose []time.Time
	x := [2]float64{1, 1}
	x[slow] = 10
	let, why := false, ""
	for range 2400 { // ten minutes of checks
		w := f.check(th, x)
		if w == "" {
			let = true
		} else if why == "" {
			why = w
		}
		if b := bases[len(bases)-1]; th.sig[slow].base != b {
			if th.sig[slow].base > b*time.Duration(max(pct, 150))/100 {
				t.Fatalf("baseline rose from %v to %v at once", b, th.sig[slow].base)
			}
			if len(rose) > 0 && f.clock.Sub(rose[len(rose)-1]) < latRaiseAfter {
				t.Fatalf("baseline rose at %v and again %v later", rose[len(rose)-1], f.clock.Sub(rose[len(rose)-1]))
			}
			bases = append(bases, th.sig[slow].base)
			rose = append(rose, f.clock)
		}
	}
	if !strings.Contains(why, "foreground's "+th.sig[slow].what+" p99") {
		t.Errorf("the copy was held because %q; want the %ss named", why, th.sig[slow].what)
	}
	if !let || th.sig[slow].base < 5*f.base[slow] {
		t.Errorf("the copy was let go: %v; baselines %v", let, bases)
	}
	if len(bases) < 4 {
		t.Errorf("baselines %v: want several steps", bases)
	}
	if other := 1 - slow; th.sig[other].base != f.base[other] {
		t.Errorf("the %ss' baseline moved from %v to %v, though they were as fast as before", th.sig[other].what, f.base[other], th.sig[other].base)
	}
}

// A foreground slowed for half a minute by the copy's after-effects (it
// stays slow with the copy held, then recovers): the bar stays where it
// was, the copy goes on by a chunk or so after each hold of latRebase, and
// takes its share again once the foreground is fast.
func TestThrottleSlowPatchKeepsTheBar(t *testing.T) {
	f := newFakeFg(150, 4)
	th := newThrottle(f.r)
	trickled := 0
	held := false
	for i := range 240 { // a minute of checks: 30 s slow, 30 s fast
		x := [2]float64{1, 1}
		if i < 120 {
			x[1] = 2
		}
		w := f.check(th, x)
		if i < 120 {
			if w != "" {
				held = true
			} else if held {
				trickled++
				held = false
			}
		}
		if th.sig[1].base != f.base[1] {
			t.Fatalf("after %v the transactions' baseline rose from %v to %v", time.Duration(i+1)*throttleEvery, f.base[1], th.sig[1].base)
		}
	}
	if trickled < 3 {
		t.Errorf("the copy went on %d times in 30 s of a slow foreground; want one a latRebase or so", trickled)
	}
	if th.share != 4 {
		t.Errorf("the foreground fast again for 30 s, the copy's share is %v; want all 4 workers", th.share)
	}
}

// A stage's throttle starts from the share the job's last one ended
// with: the catch-up after a copy slowed to a quarter of a worker must not
// start at every worker. The job's first throttle starts the copy at one
// worker once it finds a foreground, and at every worker when there is
// none.
func TestThrottleShareCarriesOver(t *testing.T) {
	f := newFakeFg(150, 4)
	th := newThrottle(f.r)
	if w := f.check(th, [2]float64{1, 1}); w != "" || th.share > 1+shareStep {
		t.Fatalf("a job's first check with a foreground: share %v (%q); want one worker", th.share, w)
	}
	// The foreground slows: the copy's share falls under a worker.
	for th.share >= 0.5 {
		f.check(th, [2]float64{1, 3})
	}
	ended := th.share
	th.keep()
	next := newThrottle(f.r)
	f.check(next, [2]float64{1, 1.3}) // within the bar
	if next.share > ended+shareStep {
		t.Errorf("the next stage's throttle started at %v; the last ended at %v", next.share, ended)
	}

	idle := newFakeFg(150, 4)
	idle.r.fgBase = [2]time.Duration{}
	th = newThrottle(idle.r)
	idle.clock = idle.clock.Add(throttleEvery)
	if w := th.latency(); w != "" || th.share != 4 {
		t.Errorf("without a foreground the copy's share is %v (%q); want all 4 workers", th.share, w)
	}
}

// The share grows only while the foreground's p99 is well under its limit
// (latGrowPct of it), stays just under the limit, and is cut above it.
func TestThrottleGrowsOnlyWellUnderTheLimit(t *testing.T) {
	f := newFakeFg(150, 4)
	f.r.share, f.r.shareKept = 1, true
	th := newThrottle(f.r)
	for range 40 {
		f.check(th, [2]float64{1, 1.4}) // 93% of the limit
	}
	if th.share != 1 {
		t.Errorf("at 93%% of its limit the share went from 1 to %v; want it kept", th.share)
	}
	for range 8 {
		f.check(th, [2]float64{1, 1.1}) // 73%
	}
	if th.share < 1.75 {
		t.Errorf("at 73%% of its limit the share went from 1 to %v in 2 s; want it grown by a step a check", th.share)
	}
	was := th.share
	f.check(th, [2]float64{1, 1.7})
	if th.share != was/2 {
		t.Errorf("over its limit the share went from %v to %v; want it halved", was, th.share)
	}
	// A held copy resumes just under the limit: it would wait for good.
	th.share = 0
	f.check(th, [2]float64{1, 1.4})
	f.check(th, [2]float64{1, 1.4})
	if th.share == 0 {
		t.Error("at 93% of its limit a held copy stayed held")
	}
}

// Below one worker's share, one worker copies and pauses in between, so
// that it copies that fraction of the time; at two, two copy at once.
func TestThrottlePacesBelowOneWorker(t *testing.T) {
	ctx := context.Background()
	th := &throttle{share: 0.25}
	if f := busyFraction(t, th.acquire); f < 0.15 || f > 0.35 {
		t.Errorf("at a share of 0.25 the copy ran %.0f%% of the time", f*100)
	}
	// Unpaced, the live catch-up's batches go right after a chunk.
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

// The catch-up's batches are paced down to catchUpMinShare, not to the
// copy's share: at a share of 1/32 one batch runs about a quarter of the
// time; unpaced (batchPace 0), back to back. The pace holds while its
// passes shrink, and is dropped after one that did not.
func TestCatchUpBatchesPaced(t *testing.T) {
	th := &throttle{share: 1.0 / 32}
	th.setBatchPace(catchUpMinShare)
	if f := busyFraction(t, th.acquireBatch); f < 0.15 || f > 0.35 {
		t.Errorf("paced at %v with a share of 1/32, the catch-up ran %.0f%% of the time", catchUpMinShare, f*100)
	}
	th = &throttle{share: 1.0 / 32}
	th.setBatchPace(0)
	if f := busyFraction(t, th.acquireBatch); f < 0.8 {
		t.Errorf("unpaced, the catch-up ran %.0f%% of the time", f*100)
	}
	for _, c := range []struct {
		last, pending int
		want          float64
	}{{-1, 100000, catchUpMinShare}, {100000, 8000, catchUpMinShare}, {8000, 9000, 0}} {
		if got := catchUpPace(c.last, c.pending); got != c.want {
			t.Errorf("a pass of %d keys after one of %d: paced at %v, want %v", c.pending, c.last, got, c.want)
		}
	}
}

// busyFraction takes 10 ms chunks through acquire for 400 ms and returns
// the fraction of the time a chunk ran.
func busyFraction(t *testing.T, acquire func(context.Context) (func(), error)) float64 {
	start := time.Now()
	var busy time.Duration
	for time.Since(start) < 400*time.Millisecond {
		done, err := acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		c := time.Now()
		time.Sleep(10 * time.Millisecond)
		busy += time.Since(c)
		done()
	}
	return float64(busy) / float64(time.Since(start))
}
