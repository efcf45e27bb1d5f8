package ddloffload

import (
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/plugins"
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

// A session's units of work, as the transaction latency counts them: from
// the first statement's arrival (or a BEGIN's answer, when a plugin earlier
// on the chain gave it) to the answer that ends the transaction; a
// statement outside a transaction is a unit of its own; units a plugin
// ended (an offloaded ALTER waiting for its job) are not counted.
func TestForegroundTransactionLatency(t *testing.T) {
	clock := time.Unix(1_000_000, 0)
	now := func() time.Time { return clock }
	pct := 150
	p := &Plugin{fg: &latencies{now: now}, fgTx: &latencies{now: now}, vars: newVars(Options{MaxLatencyPct: &pct})}
	sess := &plugins.SessionState{}
	inTx := mysql.SERVER_STATUS_IN_TRANS
	run := func(sql string, kind plugins.Kind, in bool, status uint16, src plugins.Source, took time.Duration, seen bool) {
		st := &plugins.Statement{ConnID: 1, SQL: sql, Kind: kind, InTx: in, Session: sess}
		if seen {
			p.OnStatement(st)
		}
		clock = clock.Add(took)
		p.OnResult(st, &plugins.Outcome{Status: status, Source: src, Duration: took})
	}
	counted := func() (time.Duration, int) {
		return p.fgTx.percentile(clock.Add(-time.Minute), clock.Add(time.Second), 100)
	}

	run("BEGIN", plugins.KindBegin, false, inTx, plugins.FromBackend, time.Millisecond, true)
	run("UPDATE t SET a = 1", plugins.KindUpdate, true, inTx, plugins.FromBackend, 2*time.Millisecond, true)
	clock = clock.Add(10 * time.Millisecond) // the client thinks
	run("COMMIT", plugins.KindCommit, true, 0, plugins.FromBackend, 3*time.Millisecond, true)
	if d, n := counted(); n != 1 || d < 16*time.Millisecond || d > 18*time.Millisecond {
		t.Fatalf("BEGIN, UPDATE, 10 ms, COMMIT: %d units, p100 %v; want 1 of 16 ms", n, d)
	}

	run("SELECT 1", plugins.KindSelect, false, 0, plugins.FromBackend, 40*time.Millisecond, true)
	if d, n := counted(); n != 2 || d < 40*time.Millisecond || d > 45*time.Millisecond {
		t.Fatalf("then a statement alone: %d units, p100 %v; want 2, the longest 40 ms", n, d)
	}

	run("ALTER TABLE t ADD INDEX i (a)", plugins.KindDDL, false, 0, plugins.FromPlugin, time.Minute, true)
	if _, n := counted(); n != 2 {
		t.Fatalf("an ALTER answered by a plugin was counted: %d units", n)
	}

	clock = clock.Add(time.Second)
	run("BEGIN", plugins.KindBegin, false, inTx, plugins.FromPlugin, 0, false) // answered before OnStatement
	run("SELECT a FROM t", plugins.KindSelect, true, inTx, plugins.FromBackend, 5*time.Millisecond, true)
	run("COMMIT", plugins.KindCommit, true, 0, plugins.FromBackend, time.Millisecond, true)
	if d, n := p.fgTx.percentile(clock.Add(-time.Second+time.Millisecond), clock.Add(time.Second), 100); n != 1 || d < 6*time.Millisecond || d > 7*time.Millisecond {
		t.Fatalf("a transaction begun by an answered BEGIN: %d units, p100 %v; want 1 of 6 ms", n, d)
	}
}
