package ddloffload

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The log gives back the ranges a run finished above a sequence number,
// in key order, and nothing of a torn or corrupt line or of another run.
func TestRangeLogParse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ddl_job_1.ranges")
	l, err := createRangeLog(path, 3, []rangeRecord{{Epoch: 3, Seq: partSeq(1), Lo: []string{"20"}, Hi: []string{"30"}, Rows: 10}})
	if err != nil {
		t.Fatal(err)
	}
	l.done(partSeq(0)+1, keyRange{[]string{"10"}, []string{"20"}}, 9)
	l.done(partSeq(0), keyRange{nil, []string{"10"}}, 8)
	l.done(partSeq(2), keyRange{[]string{"30"}, nil}, 4)
	if err := l.sync(); err != nil {
		t.Fatal(err)
	}
	l.close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := func(data []byte, epoch int, after int64) string {
		var s string
		for _, r := range parseRangeLog(data, epoch, after) {
			s += fmt.Sprintf("%v-%v:%d ", r.Lo, r.Hi, r.Rows)
		}
		return s
	}
	if s, want := got(data, 3, 0), "[]-[10]:8 [10]-[20]:9 [20]-[30]:10 [30]-[]:4 "; s != want {
		t.Errorf("all: %s, want %s", s, want)
	}
	if s, want := got(data, 3, partSeq(0)+1), "[20]-[30]:10 [30]-[]:4 "; s != want {
		t.Errorf("above the watermark: %s, want %s", s, want)
	}
	if s := got(data, 2, 0); s != "" {
		t.Errorf("another run's: %s", s)
	}
	// A torn last line, and a corrupt one: skipped.
	torn := append([]byte{}, data[:len(data)-5]...)
	if s, want := got(torn, 3, 0), "[]-[10]:8 [10]-[20]:9 [20]-[30]:10 "; s != want {
		t.Errorf("torn: %s, want %s", s, want)
	}
	bad := append([]byte{}, data...)
	bad[12] ^= 1 // in the first record, the kept range
	if s, want := got(bad, 3, 0), "[]-[10]:8 [10]-[20]:9 [30]-[]:4 "; s != want {
		t.Errorf("corrupt: %s, want %s", s, want)
	}
}

// The plan covers the key above the watermark: kept ranges, and the gaps
// between them to walk, numbered in key order.
func TestPlanParts(t *testing.T) {
	k := func(lo, hi string, n int64) rangeRecord {
		r := rangeRecord{Rows: n}
		if lo != "" {
			r.Lo = []string{lo}
		}
		if hi != "" {
			r.Hi = []string{hi}
		}
		return r
	}
	show := func(plan []planPart) string {
		var s string
		for i, p := range plan {
			if p.seq != partSeq(i) {
				t.Errorf("part %d numbered %d", i, p.seq)
			}
			kind := "gap"
			if p.kept {
				kind = fmt.Sprintf("kept%d", p.rows)
			}
			s += fmt.Sprintf("%s%v-%v ", kind, p.lo, p.hi)
		}
		return s
	}
	for _, c := range []struct {
		from []string
		kept []rangeRecord
		want string
	}{
		{nil, nil, "gap[]-[] "},
		{[]string{"5"}, nil, "gap[5]-[] "},
		{[]string{"5"}, []rangeRecord{k("5", "10", 3), k("10", "20", 4), k("30", "40", 5)},
			"kept3[5]-[10] kept4[10]-[20] gap[20]-[30] kept5[30]-[40] gap[40]-[] "},
		{nil, []rangeRecord{k("10", "20", 4), k("20", "", 6)}, "gap[]-[10] kept4[10]-[20] kept6[20]-[] "},
	} {
		if got := show(planParts(c.from, c.kept)); got != c.want {
			t.Errorf("planParts(%v, ...) = %s, want %s", c.from, got, c.want)
		}
	}
}
