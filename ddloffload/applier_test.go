package ddloffload

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"

	"tableproxy/internal/mysqlwire"
	"tableproxy/internal/testdb"
)

// TestLiveCopyRetriesWhenRowsChange changes a row of a live batch between
// its locking read and its copy, as a writer may. The copy must notice
// that the row it wrote is not the one the locking read saw and mark the
// key dirty again, and the shadow must end up equal to the table. The
// case this check exists for, a snapshot that misses a transaction whose
// locks have just ended, happens inside InnoDB and cannot be forced from
// SQL: there the copy is older than the locking read, here newer; the two
// reads differ either way, which is what the copy checks.
func TestLiveCopyRetriesWhenRowsChange(t *testing.T) {
	b := testdb.Get(t)
	db := b.NewDatabase(t)
	b.Exec(t,
		"CREATE TABLE `"+db+"`.t (id INT NOT NULL PRIMARY KEY, v VARCHAR(40) NOT NULL, n INT NULL) ENGINE=InnoDB",
		"INSERT INTO `"+db+"`.t SELECT seq, CONCAT('v', seq), IF(seq % 3 = 0, NULL, seq) FROM mysql.seq_1_to_1200",
		"CREATE TABLE `"+db+"`.t__new LIKE `"+db+"`.t")
	c, err := client.Connect(b.Addr, b.RootUser, b.RootPassword, db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"); err != nil {
		t.Fatal(err)
	}
	ti, err := loadTable(c, db, "t")
	if err != nil || !ti.chooseKey() {
		t.Fatal("the table or its key:", err)
	}
	r := &runner{log: slog.New(slog.NewTextHandler(io.Discard, nil)), t: ti, shadow: "t__new", conn: c,
		stream: &stream{dirty: map[string][]string{}, changed: make(chan struct{})}}

	// A writer changes one row of each of the first three batches after
	// their locking reads. (The binary log would mark it dirty again too;
	// this test's stream has no log.)
	writer := b.Root(t)
	changed := 0
	r.afterLock = func(batch [][]string) {
		if changed == 3 || len(batch) < 2 {
			return
		}
		changed++
		k := batch[len(batch)/2]
		if _, err := writer.Exec("UPDATE `" + db + "`.t SET v = CONCAT(v, '+'), n = IFNULL(n, 0) + 1 WHERE id = " + k[0]); err != nil {
			t.Error(err)
		}
	}
	var keys [][]string
	for id := 1; id <= 1200; id++ {
		keys = append(keys, []string{strconv.Itoa(id)})
	}
	r.stream.requeue(keys)
	for pass := 0; r.stream.pending() > 0; pass++ {
		if pass == 10 {
			t.Fatalf("%d keys still pending after %d passes", r.stream.pending(), pass)
		}
		if _, err := r.drain(context.Background(), c, live, nil); err != nil {
			t.Fatal(err)
		}
	}

	sum := func(table string) string {
		s, err := r.sumWhere(c, mysqlwire.QuoteTable(db, table), "TRUE")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got, want := sum("t__new"), sum("t"); got != want {
		t.Errorf("shadow %s, table %s; rows that differ: %v", got, want, r.rangeDiff(c, keyRange{}, 10))
	}
	if changed != 3 || r.raced.Load() != 3 {
		t.Errorf("%d rows changed under the copy, %d keys copied again for it; want 3 and 3", changed, r.raced.Load())
	}

	// What a failed verify logs: the rows that differ, from either side.
	b.Exec(t, "DELETE FROM `"+db+"`.t__new WHERE id = 5", "UPDATE `"+db+"`.t__new SET v = 'x' WHERE id = 7",
		"INSERT INTO `"+db+"`.t__new VALUES (5000, 'extra', NULL)")
	diff := r.rangeDiff(c, keyRange{}, 10)
	if len(diff) != 3 || !strings.HasPrefix(diff[0], "(5) table ") || !strings.HasSuffix(diff[0], " shadow -") ||
		!strings.HasPrefix(diff[1], "(5000) table - shadow ") || !strings.HasPrefix(diff[2], "(7) table ") {
		t.Errorf("rows that differ: %q", diff)
	}
}
