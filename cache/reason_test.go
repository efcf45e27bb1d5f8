package cache

import (
	"regexp"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"tableproxy/cache/eval"
)

// TestPassReasonLabels: every reason has its own snake_case label.
func TestPassReasonLabels(t *testing.T) {
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	seen := map[string]eval.PassReason{}
	for r := eval.NoReason; r < eval.NumReasons; r++ {
		l := r.String()
		if !snake.MatchString(l) {
			t.Errorf("reason %d: label %q is not snake_case", r, l)
		}
		if o, dup := seen[l]; dup {
			t.Errorf("reasons %d and %d share the label %q", o, r, l)
		}
		seen[l] = r
	}
	if got := len(eval.PassReasons()); got != int(eval.NumReasons)-1 {
		t.Errorf("PassReasons lists %d reasons, want %d", got, eval.NumReasons-1)
	}
}

// TestExplainCountsWithoutAllocating: recording a statement's outcome
// keeps its text for EXPLAIN LAST STATEMENT and counts a pass by its
// reason, without allocating once the session's buffer is there.
func TestExplainCountsWithoutAllocating(t *testing.T) {
	p := &Plugin{}
	si := &sessionInfo{}
	why := eval.Because(eval.StaleCopy, "the table's newest version is not in memory (a write is in progress, or it is reloading)")
	allocs := testing.AllocsPerRun(100, func() {
		p.explain(si, "SELECT * FROM t WHERE id = 1", false, why)
	})
	if allocs != 0 {
		t.Errorf("explain allocates %v times per statement", allocs)
	}
	if n := p.passReasons[eval.StaleCopy].Load(); n != 101 {
		t.Errorf("stale_copy counted %d times, want 101", n)
	}
	row := si.last.row()
	if row[1] != "backend" || row[2] != why.Text {
		t.Errorf("row %v, want backend and %q", row, why.Text)
	}
	p.explain(si, "SELECT 1", true, eval.Why{})
	if row := si.last.row(); row[1] != "proxy" || row[2] != "answered from the cached table in memory" {
		t.Errorf("served row %v", row)
	}
	if n := p.passReasons[eval.NoReason].Load(); n != 0 {
		t.Errorf("a served statement was counted as a pass (%d)", n)
	}
}

// TestPassReasonMetrics: one counter per reason, all under one name, each
// reading its reason's count.
func TestPassReasonMetrics(t *testing.T) {
	p := &Plugin{}
	reg := prometheus.NewRegistry()
	for _, c := range p.passReasonMetrics() {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	p.explain(&sessionInfo{}, "UPDATE t SET a = 1", false, eval.Because(eval.NotSelect, "not a SELECT"))
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 {
		t.Fatalf("gathered %d families, err %v", len(mfs), err)
	}
	got := map[string]float64{}
	for _, m := range mfs[0].GetMetric() {
		got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
	}
	if len(got) != int(eval.NumReasons)-1 || got["not_select"] != 1 || got["stale_copy"] != 0 {
		t.Errorf("%s: %v", mfs[0].GetName(), got)
	}
}
