package ddloffload

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
)

// The throttle holds the copy (before each chunk) while the backend is
// busy or its replicas fall behind, as gh-ost's max-load and max-lag-millis
// do: tableproxy_ddl_max_threads_running against the backend's
// Threads_running, tableproxy_ddl_max_replica_lag against each replica's
// lag (replicas.go). And, on by
// default, tableproxy_ddl_max_latency_pct against the foreground's latency
// as the proxy sees it (see latency). All are global variables read at
// every check, so a DBA can relieve or tighten a running job. 0 turns a
// check off.
type throttle struct {
	p   *Plugin
	r   *runner
	mu  sync.Mutex // guards why, share, busy and notBefore; taken by each chunk
	why string
	// replicas reads the replicas' lag (replicas.go); only run's
	// goroutine touches it.
	replicas *replicaWatch
	// measured is closed once run has measured for the first time (or
	// given up): no chunk is copied before, so that a replica already
	// lagging when the stage starts holds the copy from its first chunk,
	// however fast the copy would be over.
	measured     chan struct{}
	measuredOnce sync.Once

	// share is how much of the workers' time the latency check lets the
	// copy use, in workers: halved when the foreground is too slow,
	// shareStep more each time it is not, up to all of them; at 0 the
	// copy waits (why says so). A share of w ≥ 1 lets w workers copy at
	// once (busy do); below 1, one worker copies and then pauses, so that
	// it copies that fraction of the time (notBefore: when the next chunk
	// may start). The copy slows smoothly rather than in bursts of every
	// worker at once, which hurt a foreground on a backend with few cores
	// for seconds after each.
	share     float64
	busy      int
	notBefore time.Time
	// lastCut is when the latency check last halved share: at most once
	// per latWindow, as the window a check reads still holds the
	// latencies from before the last cut.
	lastCut time.Time
	// batchPace is the least share the live catch-up's batches are paced
	// at (see acquireBatch); 0: they are not paced.
	batchPace float64
	// slowStart: this is the job's first throttle; its first latency
	// check that finds a foreground lets the copy start at one worker.
	slowStart bool

	// The latency check's state; only run's goroutine touches it.
	sig       [2]fgSignal   // the foreground's statements and transactions
	probeFrom time.Time     // while the copy is held to measure baselines: from when
	heldSince time.Time     // the latency check has held the copy since (zero: it does not)
	holds     int           // times the latency check held the copy
	held      time.Duration // for how long in all
	slowSince time.Time     // since when every hold found the foreground over its bar alone (zero: not)
	lastLog   time.Time
	unlogged  int // changes not logged since lastLog
}

// fgSignal is one measure of the foreground that the latency check
// watches: its latencies as the proxy records them, and their p99 without
// the copy.
type fgSignal struct {
	what   string // "statement" or "transaction", for the log and the job's state
	l      *latencies
	base   time.Duration // 0: not known yet
	probed bool          // a hold to measure base found too little foreground: not again
}

// limit is the p99 above which the signal slows the copy.
func (s *fgSignal) limit(pct int64) time.Duration { return s.base * time.Duration(pct) / 100 }

// newThrottle makes a throttle for a stage of r; start it with run. It
// starts from the share the job's previous stage ended with: a stage that
// started at every worker made the foreground's worst seconds of the job
// (the catch-up's p99 2.7 times idle), until the check, cutting once per
// latWindow, had halved the share down again.
func newThrottle(r *runner) *throttle {
	t := &throttle{p: r.p, r: r, share: float64(r.set.Workers), sig: [2]fgSignal{
		{what: "statement", l: r.p.fg, base: r.fgBase[0]},
		{what: "transaction", l: r.p.fgTx, base: r.fgBase[1]},
	}}
	if r.shareKept {
		t.share = min(r.share, t.share)
	} else {
		t.slowStart = true
	}
	return t
}

// keep leaves what the throttle learned to the job's next stage: the
// foreground's baselines and the copy's share.
func (t *throttle) keep() {
	t.r.fgBase = [2]time.Duration{t.sig[0].base, t.sig[1].base}
	t.mu.Lock()
	t.r.share, t.r.shareKept = t.share, true
	t.mu.Unlock()
}

// startThrottle starts a throttle measuring for a stage of r until ctx
// ends or stop is called; stop waits for it and keeps the foreground's
// baseline it found for the job's next stage.
func (r *runner) startThrottle(ctx context.Context) (th *throttle, stop func()) {
	th = newThrottle(r)
	th.measured = make(chan struct{})
	ctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		th.run(ctx)
	}()
	return th, func() {
		cancel()
		<-stopped
		th.keep()
	}
}

// throttled runs f with a throttle measuring meanwhile.
func (r *runner) throttled(ctx context.Context, f func(th *throttle) error) error {
	th, stop := r.startThrottle(ctx)
	defer stop()
	return f(th)
}

// throttleEvery is how often the throttle measures.
const throttleEvery = 250 * time.Millisecond

const (
	// defaultMaxLatencyPct is tableproxy_ddl_max_latency_pct's default.
	defaultMaxLatencyPct = 150
	// shareStep is how much the copy's share grows (in workers) each
	// throttleEvery the foreground is fast enough: from one worker's
	// eighth to a whole worker in two seconds, to four in eight.
	shareStep = 1.0 / 8
	// minShare: a share halved below this holds the copy.
	minShare = 1.0 / 32
	// latGrowPct: the share grows only while every p99 is below this
	// percentage of its limit, and stays as it is between that and the
	// limit. Grown whenever the p99 was at most the limit, the copy kept
	// the foreground's 500 ms windows at the limit itself, half of them
	// above it, and the job's own p99 landed above the limit (1.6 times
	// idle against a bar of 1.5).
	latGrowPct = 80
	// catchUpMinShare: the live catch-up's batches are paced down to this
	// share and no lower, so that it applies changes several times faster
	// than a write-heavy foreground makes them (its first pass applied
	// 288 s of them in 20 s).
	catchUpMinShare = 1.0 / 4
	// latWindow is the foreground's recent past the check reads: short,
	// so that the copy slows as soon as the foreground does.
	latWindow = 500 * time.Millisecond
	// latLongWindow is read when latWindow holds too few statements.
	latLongWindow = 2 * time.Second
	// latBaseWindow is the past before the job that gives the baseline.
	latBaseWindow = 10 * time.Second
	// A baseline measured by holding the copy: latProbeSettle for the
	// chunks under way to finish, then latProbe of foreground alone.
	latProbeSettle = 500 * time.Millisecond
	latProbe       = time.Second
	// latRebase: a copy held this long by the latency check with the
	// foreground still over its bar (over the hold's last
	// latRebaseWindow) copies a chunk or so at shareStep, and the check
	// goes on; so a foreground that became slower by itself does not stop
	// the job, and one slowed by the copy's after-effects (InnoDB's purge,
	// a replica applying, the buffer pool) is given the time to recover.
	latRebase       = 5 * time.Second
	latRebaseWindow = 2 * time.Second
	// latRaiseAfter: a foreground found over its bar by every hold for
	// this long became slower by itself: its baseline is measured again
	// (see rebase), one step at most.
	latRaiseAfter = time.Minute
	// throttleLogEvery limits the throttle's log lines: a latency check
	// holds and releases the copy many times a minute.
	throttleLogEvery = 10 * time.Second
)

// run measures until ctx ends.
func (t *throttle) run(ctx context.Context) {
	defer t.markMeasured() // also when it gives up before measuring
	c, err := t.r.connect(ctx)
	if err != nil {
		if ctx.Err() == nil { // (not the job ending before it measured)
			t.r.log.Warn("ddl: throttle: cannot connect; not throttling", "err", err)
		}
		return
	}
	defer c.Close()
	if t.r.replicas == nil {
		// One for the job: what a stage learned of the replicas (one gone,
		// the lag seen) holds for the next.
		t.r.replicas = newReplicaWatch(t.r)
	}
	t.replicas = t.r.replicas
	defer t.replicas.stageEnded()
	tick := time.NewTicker(throttleEvery)
	defer tick.Stop()
	wasLatency := false
	for {
		why, byLatency := t.measure(ctx, c)
		if ctx.Err() != nil {
			// The stage ended while measuring: a probe cut short says
			// nothing about the replicas or the backend.
			why, byLatency = "", false
		}
		t.mu.Lock()
		was := t.why
		t.why = why
		t.mu.Unlock()
		if why != was {
			t.r.rec.throttled.Store(&why)
		}
		if (why == "") != (was == "") {
			t.logChange(why, byLatency || wasLatency)
		}
		t.markMeasured()
		wasLatency = byLatency
		select {
		case <-ctx.Done():
			empty := ""
			t.r.rec.throttled.Store(&empty)
			if t.holds > 0 {
				t.r.log.Info("ddl: the foreground's latency held the copy", "times", t.holds, "for", t.held.Round(time.Millisecond))
			}
			return
		case <-tick.C:
		}
	}
}

// markMeasured lets the chunks waiting for the first measurement go.
func (t *throttle) markMeasured() {
	if t.measured != nil {
		t.measuredOnce.Do(func() { close(t.measured) })
	}
}

// logChange logs the copy being held or let go. A change the latency
// check made is logged at most once every throttleLogEvery: it may hold
// and release the copy many times a minute. The job's state shows whether
// it is throttled now.
func (t *throttle) logChange(why string, byLatency bool) {
	now := time.Now()
	if byLatency && !t.lastLog.IsZero() && now.Sub(t.lastLog) < throttleLogEvery {
		t.unlogged++
		return
	}
	t.lastLog = now
	if why != "" {
		t.r.log.Info("ddl: copy throttled", "why", why, "changes_not_logged", t.unlogged)
	} else {
		t.r.log.Info("ddl: copy no longer throttled", "changes_not_logged", t.unlogged)
	}
	t.unlogged = 0
}

// measure returns why the copy must wait now, or "", and whether the
// latency check is why.
func (t *throttle) measure(ctx context.Context, c *client.Conn) (string, bool) {
	if limit := t.p.vars.globalInt(varPrefix + "max_threads_running"); limit > 0 {
		res, err := c.Execute("SHOW GLOBAL STATUS LIKE 'Threads_running'")
		if err == nil && res.RowNumber() > 0 {
			n, _ := res.GetInt(0, 1)
			if n > limit {
				return fmt.Sprintf("Threads_running %d > tableproxy_ddl_max_threads_running %d", n, limit), false
			}
		}
	}
	if why := t.latency(); why != "" {
		return why, true
	}
	if limit := t.p.vars.globalInt(varPrefix + "max_replica_lag"); limit > 0 {
		if why := t.replicas.check(ctx, c, time.Duration(limit)*time.Second); why != "" {
			return why, false
		}
	}
	return "", false
}

// wait returns once the copy may go on, or ctx ends.
func (t *throttle) wait(ctx context.Context) error {
	done, err := t.acquire(ctx)
	if err == nil {
		done()
	}
	return err
}

// acquire returns once a chunk may be copied, or ctx ends; done is called
// when the chunk is.
func (t *throttle) acquire(ctx context.Context) (done func(), err error) {
	return t.take(ctx, false)
}

// acquireBatch is acquire for a batch of the live catch-up, which is paced
// at batchPace at least (not at all when 0): its work is the application's
// own writes, applied once more, and applied more slowly than they come it
// would never end. Unpaced, the catch-up's first pass ran at full speed
// whatever the share (one connection: only a held copy stopped it), and
// its 25 s were the foreground's slowest of the job. It waits while the
// copy is held, and with the copy's chunks.
func (t *throttle) acquireBatch(ctx context.Context) (done func(), err error) {
	return t.take(ctx, true)
}

// setBatchPace sets batchPace (see acquireBatch).
func (t *throttle) setBatchPace(least float64) {
	t.mu.Lock()
	t.batchPace = least
	t.mu.Unlock()
}

func (t *throttle) take(ctx context.Context, batch bool) (done func(), err error) {
	if t.measured != nil {
		select {
		case <-t.measured:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	for {
		t.mu.Lock()
		paced := !batch || t.batchPace > 0
		wait := time.Until(t.notBefore)
		if !paced {
			wait = 0
		}
		if t.why == "" && t.busy < t.slotsLocked() && wait <= 0 {
			t.busy++
			t.mu.Unlock()
			start := time.Now()
			return func() {
				t.mu.Lock()
				defer t.mu.Unlock()
				t.busy--
				share := t.share
				if batch {
					share = max(share, t.batchPace)
				}
				if paced && share > 0 && share < 1 {
					// Copy share of the time: a chunk of d, then a pause.
					took := time.Since(start)
					t.notBefore = time.Now().Add(time.Duration(float64(took) * (1 - share) / share))
				}
			}, nil
		}
		t.mu.Unlock()
		wait = min(max(wait, time.Millisecond), 10*time.Millisecond)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// slotsLocked is how many chunks may be copied at once.
func (t *throttle) slotsLocked() int {
	switch {
	case t.share <= 0:
		return 0
	case t.share < 1:
		return 1
	}
	return int(t.share)
}

// latency slows the copy while the foreground's p99 over the last
// latWindow is above tableproxy_ddl_max_latency_pct percent of its p99
// without the copy: each time, the copy's share of the workers' time
// halves, down to none (the copy is held); each time it is not, it grows
// by shareStep (see throttle.share). Two p99s are
// watched, the statements' and the transactions' (see Plugin.unitEnded);
// either one over its bar slows the copy. A baseline is the p99 of the
// latBaseWindow before the job started; when the job started without a
// foreground, or too long ago (a resumed job), the copy is held once for
// latProbe to measure it. Slowed and let go as the foreground slows and
// recovers, the copy takes what the foreground leaves; with no foreground
// at all, it runs at full speed.
func (t *throttle) latency() string {
	pct := t.p.vars.globalInt(varPrefix + "max_latency_pct")
	if pct <= 0 {
		t.heldSince = time.Time{}
		t.mu.Lock()
		t.share = float64(t.r.set.Workers)
		t.mu.Unlock()
		return ""
	}
	now := t.p.fg.now()
	if why, measuring := t.baselines(now); measuring {
		return why
	}
	if t.slowStart && (t.sig[0].base != 0 || t.sig[1].base != 0) {
		// The job's first check that finds a foreground: the copy starts
		// at one worker and grows as the foreground allows. Started at
		// every worker, it doubled the foreground's p99 for the seconds
		// the check took to halve the share down.
		t.slowStart = false
		t.mu.Lock()
		t.share = min(t.share, 1)
		t.mu.Unlock()
	}
	var over *fgSignal
	var cur time.Duration
	near := false // a p99 above latGrowPct of its limit
	for i := range t.sig {
		s := &t.sig[i]
		if s.base == 0 {
			continue
		}
		p99, n := s.l.percentile(now.Add(-latWindow), now, 99)
		if n < latMinCount {
			// A foreground slowed down sends fewer statements: look further back.
			p99, n = s.l.percentile(now.Add(-latLongWindow), now, 99)
		}
		if n < latMinCount {
			continue
		}
		if p99 > s.limit(pct) {
			over, cur = s, p99
			break
		}
		near = near || p99 > s.limit(pct)*latGrowPct/100
	}
	t.mu.Lock()
	switch {
	case over == nil && (!near || t.share == 0):
		// A held copy resumes in the band too: the foreground is under
		// its bar.
		t.share = min(t.share+shareStep, float64(t.r.set.Workers))
	case over == nil:
		// Close under the limit: the share stays (see latGrowPct).
	case now.Sub(t.lastCut) >= latWindow:
		t.lastCut = now
		if t.share /= 2; t.share < minShare {
			t.share = 0
		}
	}
	share := t.share
	t.mu.Unlock()
	if over == nil {
		t.slowSince = time.Time{}
	}
	if share > 0 || over == nil {
		t.endHold(now)
		return ""
	}
	switch {
	case t.heldSince.IsZero():
		t.heldSince = now
		t.holds++
	case now.Sub(t.heldSince) >= latRebase:
		// The foreground is over its bar with the copy held: copy a
		// chunk or so (see latRebase), with the bar where it was, unless
		// every hold has found it so for latRaiseAfter.
		if t.slowSince.IsZero() {
			t.slowSince = t.heldSince
		}
		if now.Sub(t.slowSince) >= latRaiseAfter && t.rebase(now, pct) {
			t.slowSince = time.Time{}
		}
		t.endHold(now)
		t.mu.Lock()
		t.share = shareStep
		t.mu.Unlock()
		return ""
	}
	return fmt.Sprintf("the foreground's %s p99 latency %v > tableproxy_ddl_max_latency_pct %d%% of its %v without the copy",
		over.what, cur.Round(10*time.Microsecond), pct, over.base.Round(10*time.Microsecond))
}

// endHold counts the latency check's hold, if one is on, as ended now.
func (t *throttle) endHold(now time.Time) {
	if !t.heldSince.IsZero() {
		t.held += now.Sub(t.heldSince)
		t.heldSince = time.Time{}
	}
}

// baselines finds the p99s without the copy that are not known yet: from
// the latBaseWindow before the job, or else by holding the copy for
// latProbe (measuring reports that, with why the copy waits).
func (t *throttle) baselines(now time.Time) (why string, measuring bool) {
	missing := false
	for i := range t.sig {
		missing = missing || t.sig[i].base == 0
	}
	if !missing {
		return "", false
	}
	if t.probeFrom.IsZero() {
		start := t.r.rec.snapshot().Start
		recent := now.Sub(start) < latSlots*latSlot-latBaseWindow
		probe := false
		for i := range t.sig {
			s := &t.sig[i]
			if s.base != 0 {
				continue
			}
			if b, n := s.l.percentile(start.Add(-latBaseWindow), start, 99); recent && n >= latMinCount {
				s.base = b
				t.r.log.Info("ddl: the foreground's p99 latency before the job", "of", s.what+"s", "p99", b, "count", n)
				continue
			}
			if _, n := s.l.percentile(now.Add(-latLongWindow), now, 99); n >= latMinCount && !s.probed {
				probe = true
			}
		}
		if !probe {
			return "", false // no foreground (left) to slow down
		}
		t.probeFrom = now.Add(latProbeSettle)
	}
	if now.Before(t.probeFrom.Add(latProbe)) {
		return "measuring the foreground's latency without the copy", true
	}
	for i := range t.sig {
		s := &t.sig[i]
		if s.base != 0 {
			continue
		}
		s.probed = true
		if b, n := s.l.percentile(t.probeFrom, now, 99); n >= latMinCount {
			s.base = b
			t.r.log.Info("ddl: the foreground's p99 latency with the copy held", "of", s.what+"s", "p99", b, "count", n)
		}
	}
	t.probeFrom = time.Time{}
	return "", false
}

// rebase measures the baselines again over the hold's last
// latRebaseWindow, long after the chunks under way when it began have
// ended, once every hold of latRebase has found the foreground over its
// bar for latRaiseAfter: a foreground that became slower by itself is not
// held to its old bar for good. Not sooner: raised at the first such hold,
// a baseline set the limit at 2.25 times the real one for the rest of a
// job, its catch-up included, though the slowness was the copy's
// after-effects; the chunks copied at each hold meanwhile (see latRebase)
// keep the job going. A new baseline rises one step at most (to the limit
// it replaces, or to 1.5 times itself when that limit is lower), as a p99
// of 3.3 ms against 1.15 ms before the job once showed; one that really
// became slower is followed step by step, one each latRaiseAfter. It
// reports whether a baseline rose.
func (t *throttle) rebase(now time.Time, pct int64) bool {
	rose := false
	for i := range t.sig {
		s := &t.sig[i]
		if s.base == 0 {
			continue
		}
		if b, n := s.l.percentile(now.Add(-latRebaseWindow), now, 99); n >= latMinCount && b > s.base {
			b = min(b, max(s.limit(pct), s.base*3/2))
			t.r.log.Info("ddl: the foreground is slower without the copy too; its p99 latency measured again", "of", s.what+"s", "was", s.base, "now", b)
			s.base = b
			rose = true
		}
	}
	return rose
}
