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
		c.cut(seq, hi)
	}
	check := func(wantMark string, wantRows int64, wantEnd bool) {
		t.Helper()
		mark, rows, end, _ := c.watermark()
		if fmt.Sprint(mark) != wantMark || rows != wantRows || end != wantEnd {
			t.Errorf("watermark %v rows %d end %v, want %s %d %v", mark, rows, end, wantMark, wantRows, wantEnd)
		}
	}
	c.finish(1, 100)
	c.finish(2, 100)
	check("[10]", 7, false)
	c.finish(0, 5)
	check("[40]", 212, false)
	if _, _, _, changed := c.watermark(); changed {
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
		c.cut(i, hi)
	}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := n - 1 - w; i >= 0; i -= 4 {
				c.finish(i, 1)
			}
		}()
	}
	wg.Wait()
	if _, rows, end, _ := c.watermark(); rows != n || !end {
		t.Errorf("rows %d end %v", rows, end)
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
