package ddloffload

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"tableproxy/internal/testdb"
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

// A resumed copy keeps the logged ranges above the watermark that the
// shadow holds whole, and only those: a range the shadow holds in part, a
// range copied but not logged, ranges of another run or below the
// watermark are not kept; every row above the
// watermark outside kept ranges is deleted, and the sort gets the kept
// ranges' keys again, read from the shadow.
func TestResumedCopyKeepsWholeRanges(t *testing.T) {
	b := testdb.Get(t)
	db := b.NewDatabase(t)
	b.Exec(t,
		"CREATE TABLE `"+db+"`.t (id INT NOT NULL PRIMARY KEY, u INT NULL) ENGINE=InnoDB",
		"INSERT INTO `"+db+"`.t SELECT seq, seq FROM mysql.seq_1_to_1000",
		"CREATE TABLE `"+db+"`.t__new LIKE `"+db+"`.t",
		// The stopped run: up to 100 below the watermark; (100, 200] and
		// (400, 500] copied and logged; (200, 300] logged but half there
		// (say the backend lost a commit the log kept); (300, 400] copied
		// but not logged; nothing above 500.
		"INSERT INTO `"+db+"`.t__new SELECT * FROM `"+db+"`.t WHERE id <= 250 OR id > 300 AND id <= 500")
	c, err := client.Connect(b.Addr, b.RootUser, b.RootPassword, db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ti, err := loadTable(c, db, "t")
	if err != nil || !ti.chooseKey() {
		t.Fatal("the table or its key:", err)
	}
	dir := t.TempDir()
	reg, err := openRegistry(dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := reg.add(Job{Schema: db, Table: "t", State: StateRunning, Resumes: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := &Plugin{jobs: reg, backend: rootBackend{b.Addr, b.RootUser, b.RootPassword, db}}
	k := func(s string) []string {
		if s == "" {
			return nil
		}
		return []string{s}
	}
	l, err := createRangeLog(p.rangeLogPath(rec.job.ID), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		seq    int64
		lo, hi string
		n      int64
	}{
		{1, "", "100", 100}, // below the watermark
		{2, "100", "200", 100},
		{3, "200", "300", 100},
		{5, "400", "500", 100},
	} {
		l.done(r.seq, keyRange{k(r.lo), k(r.hi)}, r.n)
	}
	l.epoch = 0 // another run's, overlapping
	l.done(9, keyRange{k("450"), k("")}, 550)
	l.close()

	r := &runner{p: p, rec: rec, log: slog.New(slog.DiscardHandler), t: ti, shadow: "t__new", conn: c, resumed: true,
		cp: Checkpoint{Watermark: k("100"), Rows: 100, RangeEpoch: 1, MarkSeq: 1}}
	r.uniques = []uniqueIndex{{name: "uq", parts: []uniquePart{{col: ti.column("u"), raw: "`u`", isInt: true}}}}
	r.sorters = []*sorter{{r: r, budget: 1 << 30}}
	plan, again, err := r.planCopy(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for _, p := range plan {
		kind := "gap"
		if p.kept {
			kind = fmt.Sprintf("kept%d", p.rows)
		}
		got += fmt.Sprintf("%s%v-%v ", kind, p.lo, p.hi)
	}
	if want := "kept100[100]-[200] gap[200]-[400] kept100[400]-[500] gap[500]-[] "; got != want {
		t.Errorf("plan %s, want %s", got, want)
	}
	if again != 150 {
		t.Errorf("%d rows deleted to copy again, want 150 (201-250, 301-400)", again)
	}
	res, err := c.Execute("SELECT COUNT(*), SUM(id > 100 AND id <= 200 OR id > 400 AND id <= 500) FROM t__new")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.GetInt(0, 0); n != 300 {
		t.Errorf("the shadow holds %d rows, want 300: below the watermark and the kept ranges", n)
	}
	if n := len(r.sorters[0].buf); n != 200 {
		t.Errorf("the sort got %d entries of the kept ranges, want 200", n)
	}
	// The new run's log holds the kept ranges, numbered in its plan, and
	// the checkpoint names it.
	data, err := os.ReadFile(p.rangeLogPath(rec.job.ID))
	if err != nil {
		t.Fatal(err)
	}
	logged := parseRangeLog(data, 2, 0)
	if len(logged) != 2 || logged[0].Seq != plan[0].seq || logged[1].Seq != plan[2].seq {
		t.Errorf("the new log: %+v", logged)
	}
	if cp := rec.snapshot().Checkpoint; cp.RangeEpoch != 2 || cp.MarkSeq != 0 || fmt.Sprint(cp.Watermark) != "[100]" {
		t.Errorf("checkpoint %+v", cp)
	}
	r.ranges.close()
}

// rootBackend connects as the test database's root.
type rootBackend struct{ addr, user, password, db string }

func (rb rootBackend) Connect(ctx context.Context, _, _ string) (*client.Conn, error) {
	return client.ConnectWithContext(ctx, rb.addr, rb.user, rb.password, rb.db, 10*time.Second)
}

func (rootBackend) AccountsChanged() {}
