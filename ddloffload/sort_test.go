package ddloffload

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// Integer keys encode so that byte order is numeric order.
func TestIntKeyOrder(t *testing.T) {
	vals := []int64{math.MinInt64, -1 << 40, -2, -1, 0, 1, 2, 255, 256, 1 << 40, math.MaxInt64}
	var prev []byte
	for _, v := range vals {
		k := intKey(mysql.NewFieldValue(mysql.FieldValueTypeSigned, uint64(v), nil))
		if prev != nil && bytes.Compare(prev, k) >= 0 {
			t.Errorf("intKey(%d) does not sort after its predecessor", v)
		}
		if got := intFromKey(k); got != strconv.FormatInt(v, 10) {
			t.Errorf("intFromKey(intKey(%d)) = %s", v, got)
		}
		prev = k
	}
	u := intKey(mysql.NewFieldValue(mysql.FieldValueTypeUnsigned, math.MaxUint64, nil))
	if bytes.Compare(prev, u) >= 0 || intFromKey(u) != "18446744073709551615" {
		t.Errorf("unsigned max: %x %s", u, intFromKey(u))
	}
}

// Spilled runs are sorted and read back whole; past the quota, the spill
// fails with 1878 and leaves no file.
func TestSorterSpill(t *testing.T) {
	r := &runner{rec: &jobRec{job: Job{ID: 3}}, set: Settings{TempDir: t.TempDir(), DiskQuota: 1 << 30}}
	if err := os.MkdirAll(r.tempDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	s := &sorter{r: r, budget: 4096}
	var want [][]byte
	for i := 0; i < 1000; i++ {
		k := []byte{byte(rand.N(256)), byte(i), byte(i >> 8)}
		want = append(want, k)
		if err := s.add([]sortEntry{{key: k, rest: []byte{1}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.spill(); err != nil {
		t.Fatal(err)
	}
	if len(s.runList()) < 2 {
		t.Fatalf("%d runs for 1000 entries over a 4 KB budget", len(s.runList()))
	}
	var got int
	for _, p := range s.runList() {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		rr := &runReader{f: f, br: bufio.NewReader(f)}
		var prev []byte
		for {
			ok, err := rr.next()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			if prev != nil && bytes.Compare(prev, rr.cur.key) > 0 {
				t.Errorf("run %s out of order", p)
			}
			prev = rr.cur.key
			got++
		}
		f.Close()
	}
	if got != len(want) {
		t.Errorf("read %d entries back, wrote %d", got, len(want))
	}
	r.set.DiskQuota = r.sortBytes.Load() + 10
	runs := slices.Clone(s.runList())
	for i := 0; i < 200; i++ {
		s.buf = append(s.buf, sortEntry{key: []byte{byte(i)}, rest: []byte{2}})
	}
	var me *mysql.MyError
	if err := s.spill(); !errors.As(err, &me) || me.Code != 1878 {
		t.Errorf("spill past the quota: %v", err)
	}
	if ents, _ := os.ReadDir(r.tempDir()); len(ents) != len(runs) {
		t.Errorf("%d files after a refused spill, want %d", len(ents), len(runs))
	}
}

// A row the sort sees twice (a range a resumed copy kept or copied again,
// whose entries a stopped run had spilled already) is one row, not a
// duplicate: the merge does not even ask the table (the runner here has
// no connection).
func TestSortRowSeenTwiceIsNoDuplicate(t *testing.T) {
	r := &runner{rec: &jobRec{job: Job{ID: 4}}, set: Settings{TempDir: t.TempDir(), DiskQuota: 1 << 30},
		uniques: []uniqueIndex{{name: "uq"}}, log: slog.New(slog.DiscardHandler)}
	if err := os.MkdirAll(r.tempDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	s := &sorter{r: r, budget: 1 << 20}
	entry := func(key string, pk int64, raw string) sortEntry {
		id := appendPart(nil, intKey(mysql.NewFieldValue(mysql.FieldValueTypeSigned, uint64(pk), nil)))
		return sortEntry{key: []byte(key), rest: appendPart(appendPart(nil, id), []byte(raw))}
	}
	for _, batch := range [][]sortEntry{
		{entry("a", 1, "a"), entry("b", 2, "b"), entry("c", 3, "c")}, // spilled at a checkpoint
		{entry("a", 1, "A"), entry("b", 2, "b")},                     // read again after the resume
	} {
		if err := s.add(batch); err != nil {
			t.Fatal(err)
		}
		if err := s.spill(); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.mergeRuns(context.Background(), s); err != nil {
		t.Fatalf("a row seen twice: %v", err)
	}
}
