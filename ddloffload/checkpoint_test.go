package ddloffload

import (
	"fmt"
	"sync"
	"testing"
)

// The watermark moves only past ranges finished with every range before
// them, whatever order the workers finish in.
func TestCopyTrackerWatermark(t *testing.T) {
	c := newCopyTracker([]string{"10"}, 7)
	for seq, hi := range [][]string{{"20"}, {"30"}, {"40"}, nil} {
		c.cut(int64(seq), hi)
	}
	check := func(wantMark string, wantRows int64, wantEnd bool) {
		t.Helper()
		m, _ := c.watermark()
		if fmt.Sprint(m.key) != wantMark || m.rows != wantRows || m.end != wantEnd {
			t.Errorf("watermark %v rows %d end %v, want %s %d %v", m.key, m.rows, m.end, wantMark, wantRows, wantEnd)
		}
	}
	c.finish(1, 100)
	c.finish(2, 100)
	check("[10]", 7, false)
	c.finish(0, 5)
	check("[40]", 212, false)
	if _, changed := c.watermark(); changed {
		t.Errorf("changed reported twice")
	}
	c.finish(3, 1)
	check("[40]", 213, true)
}

// Concurrent finishing, as the copy's workers do (run with -race).
func TestCopyTrackerConcurrent(t *testing.T) {
	const n = 1000
	c := newCopyTracker(nil, 0)
	for i := 0; i < n; i++ {
		hi := []string{fmt.Sprint(i)}
		if i == n-1 {
			hi = nil
		}
		c.cut(int64(i), hi)
	}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := n - 1 - w; i >= 0; i -= 4 {
				c.finish(int64(i), 1)
			}
		}()
	}
	wg.Wait()
	if m, _ := c.watermark(); m.rows != n || !m.end {
		t.Errorf("rows %d end %v", m.rows, m.end)
	}
}

// A resumed copy's ranges are numbered by plan part, not consecutively:
// the watermark follows the order they were cut in, and passes kept
// ranges finished at once.
func TestCopyTrackerSparseSeqs(t *testing.T) {
	c := newCopyTracker([]string{"10"}, 0)
	c.cut(partSeq(0), []string{"20"})
	c.cut(partSeq(0)+1, []string{"30"})
	c.cut(partSeq(1), []string{"40"}) // kept
	c.finish(partSeq(1), 7)
	c.cut(partSeq(2), nil)
	c.finish(partSeq(0)+1, 5)
	if m, _ := c.watermark(); m.seq != 0 || fmt.Sprint(m.key) != "[10]" {
		t.Fatalf("watermark moved past an unfinished range: %+v", m)
	}
	c.finish(partSeq(0), 3)
	if m, _ := c.watermark(); m.seq != partSeq(1) || fmt.Sprint(m.key) != "[40]" || m.rows != 15 || m.end {
		t.Fatalf("watermark %+v, want past the kept range at [40] with 15 rows", m)
	}
	c.finish(partSeq(2), 1)
	if m, _ := c.watermark(); !m.end || m.rows != 16 {
		t.Fatalf("watermark %+v, want the end with 16 rows", m)
	}
}

func TestParseStall(t *testing.T) {
	for in, want := range map[string]string{
		"":                "off",
		"nope":            "off",
		"backfill":        "backfill 30s",
		"cut-over:1500ms": "cut-over 1.5s",
	} {
		sp, ok := parseStall(in)
		got := "off"
		if ok {
			got = sp.stage.String() + " " + sp.d.String()
		}
		if got != want {
			t.Errorf("parseStall(%q) = %s, want %s", in, got, want)
		}
	}
}
