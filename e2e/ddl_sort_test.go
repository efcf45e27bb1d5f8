package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"tableproxy/internal/testdb"
)

// TestDDLUniqueSort: the external sort checks new UNIQUE indexes with the
// column's collation (case and trailing spaces under PAD SPACE, none under
// NO PAD, prefixes), lets NULLs repeat, spills runs when its memory is
// small, and reports a duplicate with the error native ALTER gives, before
// anything is swapped; its runs are gone afterwards.
func TestDDLUniqueSort(t *testing.T) {
	e := newDDLEnv(t)
	native := e.backend.NewDatabase(t)
	const schema = `(id INT NOT NULL PRIMARY KEY, s VARCHAR(40) COLLATE utf8mb4_general_ci, np VARCHAR(40) COLLATE utf8mb4_nopad_bin,
		n INT NULL, pad CHAR(200) NOT NULL DEFAULT '') ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`
	for _, db := range []string{e.db, native} {
		e.backend.Exec(t, "CREATE TABLE `"+db+"`.t "+schema,
			"INSERT INTO `"+db+"`.t (id, s, np, n, pad) SELECT seq, CONCAT('v', seq), CONCAT('w', seq), IF(seq % 3 = 0, NULL, seq), REPEAT('p', 150) FROM mysql.seq_1_to_40000",
			"UPDATE `"+db+"`.t SET s = 'abc', np = 'x' WHERE id = 20001",
			"UPDATE `"+db+"`.t SET s = 'ABC ', np = 'x ' WHERE id = 30002",
			"UPDATE `"+db+"`.t SET s = 'abcdef' WHERE id = 7",
			"UPDATE `"+db+"`.t SET s = 'ABCxyz' WHERE id = 35000")
	}
	direct := e.direct(t)
	nat := testdb.Open(t, testdb.DSN(e.backend.Addr, e.backend.RootUser, e.backend.RootPassword, native, nil))
	conn := e.session(t, "SET tableproxy_ddl_sort_memory = '1M'", "SET tableproxy_ddl_batch_size = 1000")
	before := showCreate(t, direct, "t")
	for _, q := range []string{"ALTER TABLE t ADD UNIQUE INDEX uq_s (s)", "CREATE UNIQUE INDEX uq_s3 ON t (s(3))",
		"ALTER TABLE t ADD UNIQUE uq_np (np), ADD UNIQUE uq_s (s)"} {
		_, got := conn.ExecContext(t.Context(), q)
		_, want := nat.Exec(q)
		if mysqlErrNumber(got) != 1062 || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s:\n got  %v\n want %v (native)", q, got, want)
		}
	}
	log := e.proxy.stderr.String()
	if n := strings.Count(log, "duplicate found by the sort"); n != 3 {
		t.Errorf("%d duplicates found by the sort, want 3", n)
	}
	if got := showCreate(t, direct, "t"); got != before {
		t.Errorf("definition changed by failed jobs:\n%s", got)
	}
	// NO PAD tells 'x' from 'x '; NULLs never conflict; the sort spilled.
	for _, q := range []string{"ALTER TABLE t ADD UNIQUE INDEX uq_np (np), ADD UNIQUE INDEX uq_n (n)"} {
		if _, err := conn.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	m := regexp.MustCompile(`unique index checked by the sort" job=4 .* index=uq_n runs=(\d+) entries=(\d+) candidates=0 duplicates=0`).FindStringSubmatch(e.proxy.stderr.String())
	if m == nil {
		t.Fatalf("no sort of uq_n in the log")
	}
	if runs, _ := strconv.Atoi(m[1]); runs < 2 || m[2] != "26667" {
		t.Errorf("uq_n sorted in %s runs with %s entries; want several runs, and no NULLs", m[1], m[2])
	}
	if l := leftovers(t, direct); len(l) > 0 {
		t.Errorf("tables left behind: %v", l)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.dataDir, "ddl-tmp")); len(ents) > 0 {
		t.Errorf("temp dir not emptied: %v", ents)
	}
}

// TestDDLSortTempSpace: a sort that outgrows tableproxy_ddl_disk_quota, or
// a temp dir that is full, fails the job with a clear MySQL error; the
// table is untouched.
func TestDDLSortTempSpace(t *testing.T) {
	e := newDDLEnv(t)
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.t (id INT PRIMARY KEY, s VARCHAR(200)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
		"INSERT INTO `"+e.db+"`.t SELECT seq, CONCAT(seq, REPEAT('s', 190)) FROM mysql.seq_1_to_20000")
	admin, direct := e.open(t, e.admin), e.direct(t)
	before := showCreate(t, direct, "t")
	conn := e.session(t, "SET tableproxy_ddl_sort_memory = '1M'")
	// Preflight's estimate (48 bytes a row) passes 2 MB; the keys need more.
	if _, err := admin.Exec("SET GLOBAL tableproxy_ddl_disk_quota = '2M'"); err != nil {
		t.Fatal(err)
	}
	_, err := conn.ExecContext(t.Context(), "ALTER TABLE t ADD UNIQUE INDEX uq_s (s)")
	wantError(t, err, 1878, "tableproxy_ddl_disk_quota (2097152 bytes)")
	// An estimate above the quota is refused before anything starts.
	if _, err := admin.Exec("SET GLOBAL tableproxy_ddl_disk_quota = 1000"); err != nil {
		t.Fatal(err)
	}
	_, err = conn.ExecContext(t.Context(), "ALTER TABLE t ADD UNIQUE INDEX uq_s (s)")
	wantError(t, err, 1878, "Temporary file write failure")
	if j, err := lastJob(admin); err != nil || j.Stage != "preflight" {
		t.Errorf("job refused by the quota: %+v %v", j, err)
	}
	if _, err := admin.Exec("SET GLOBAL tableproxy_ddl_disk_quota = DEFAULT"); err != nil {
		t.Fatal(err)
	}

	// A full disk: a small tmpfs, where the system allows mounting one.
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Logf("no tmpfs for the full-disk case (%v: %s)", err, out)
	} else {
		t.Cleanup(func() { exec.Command("umount", dir).Run() })
		if _, err := admin.Exec("SET GLOBAL tableproxy_ddl_temp_dir = '" + dir + "'"); err != nil {
			t.Fatal(err)
		}
		_, err = conn.ExecContext(t.Context(), "ALTER TABLE t ADD UNIQUE INDEX uq_s (s)")
		wantError(t, err, 1026, "No space left on device")
	}
	if got := showCreate(t, direct, "t"); got != before {
		t.Errorf("definition changed:\n%s", got)
	}
	if l := leftovers(t, direct); len(l) > 0 {
		t.Errorf("tables left behind: %v", l)
	}
}
