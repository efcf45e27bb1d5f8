package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tableproxy/internal/testdb"
)

// ddlEnv is a database with an application user and an admin who reads
// the binary log, and a proxy with the ddloffload plugin in front of it.
type ddlEnv struct {
	backend testdb.Backend
	db      string
	app     account
	admin   account
	dataDir string
	proxy   *proxyProc
}

func newDDLEnv(t *testing.T) *ddlEnv {
	b := testdb.Get(t)
	e := &ddlEnv{backend: b, db: b.NewDatabase(t), dataDir: t.TempDir()}
	e.app = account{b.NewUser(t, "app-pw", "ALL", e.db), "app-pw"}
	e.admin = account{b.NewUser(t, "admin-pw", "ALL", e.db), "admin-pw"}
	for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
		b.Exec(t, fmt.Sprintf("GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '%s'@'%s'", e.admin.name, host))
	}
	e.start(t)
	return e
}

func (e *ddlEnv) start(t *testing.T) {
	yaml := fmt.Sprintf("plugins:\n  - name: ddloffload\n    options: {strategy: backfill, workers: 4, chunk_rows: 2000, old_table_retention: 0, binlog_user: %s}\n", e.admin.name)
	e.proxy = startProxyOpts(t, e.backend.Addr, []account{e.app}, proxyOpts{yaml: yaml, admins: []account{e.admin}, dataDir: e.dataDir})
}

// seed creates table t with rows rows, u unique.
func (e *ddlEnv) seed(t *testing.T, rows int) {
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.t "+ddlTestTable,
		fmt.Sprintf("INSERT INTO `%s`.t (id, k, c, pad, u) SELECT seq, seq %% 1000, CONCAT('row-', seq), MD5(seq), seq FROM mysql.seq_1_to_%d", e.db, rows))
}

func (e *ddlEnv) open(t *testing.T, a account) *sql.DB { return e.openVia(t, e.proxy, a) }

// openVia opens the environment's database as a through proxy p (one the
// test launched itself).
func (e *ddlEnv) openVia(t *testing.T, p *proxyProc, a account) *sql.DB {
	return testdb.Open(t, testdb.DSN(p.addr, a.name, a.password, e.db, nil))
}

func (e *ddlEnv) direct(t *testing.T) *sql.DB {
	return testdb.Open(t, testdb.DSN(e.backend.Addr, e.backend.RootUser, e.backend.RootPassword, e.db, nil))
}

func showCreate(t *testing.T, db *sql.DB, table string) string {
	t.Helper()
	var name, ddl string
	if err := db.QueryRow("SHOW CREATE TABLE `"+table+"`").Scan(&name, &ddl); err != nil {
		t.Fatalf("SHOW CREATE TABLE %s: %v", table, err)
	}
	return strings.Replace(ddl, "CREATE TABLE `"+table+"`", "CREATE TABLE `?`", 1)
}

// tableSum is a checksum of a table's rows, independent of its indexes.
func tableSum(t *testing.T, db *sql.DB, table string) string {
	t.Helper()
	var n int64
	var x, s string
	err := db.QueryRow("SELECT COUNT(*), IFNULL(BIT_XOR(CRC32(CONCAT_WS('#', id, k, HEX(c), HEX(pad), IFNULL(u, 'null')))), 0), "+
		"IFNULL(SUM(CRC32(CONCAT_WS('#', id, k, HEX(c), HEX(pad), IFNULL(u, 'null')))), 0) FROM `"+table+"`").Scan(&n, &x, &s)
	if err != nil {
		t.Fatalf("checksum %s: %v", table, err)
	}
	return fmt.Sprintf("%d rows, xor %s, sum %s", n, x, s)
}

// ddlJob is a row of ADMIN SHOW DDL JOBS.
type ddlJob struct {
	ID                                int64
	Schema, Table, Type, State, Stage string
	RowsDone, Estimate, Rate          int64
	ETA, Start, End, Query, Err       sql.NullString
	Strategy, StrategyReason          sql.NullString // NULL for a job recorded before strategies were
	Kept, KeptUntil                   sql.NullString
	CutOver, BlockedBy                sql.NullString
}

// showJobs runs ADMIN SHOW DDL JOBS, newest job first.
func showJobs(db *sql.DB) ([]ddlJob, error) {
	rows, err := db.Query("ADMIN SHOW DDL JOBS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if cols, _ := rows.Columns(); len(cols) != 20 {
		return nil, fmt.Errorf("ADMIN SHOW DDL JOBS has columns %v", cols)
	}
	var jobs []ddlJob
	for rows.Next() {
		var j ddlJob
		if err := rows.Scan(&j.ID, &j.Schema, &j.Table, &j.Type, &j.State, &j.Stage, &j.RowsDone, &j.Estimate, &j.Rate, &j.ETA, &j.Start, &j.End, &j.Query, &j.Err, &j.Strategy, &j.StrategyReason, &j.Kept, &j.KeptUntil, &j.CutOver, &j.BlockedBy); err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, rows.Err()
}

// lastJob is the newest job.
func lastJob(db *sql.DB) (ddlJob, error) {
	jobs, err := showJobs(db)
	if err == nil && len(jobs) == 0 {
		err = errors.New("no jobs")
	}
	if err != nil {
		return ddlJob{}, err
	}
	return jobs[0], nil
}

// jobTablePattern matches the tables a job makes beside its table: the
// shadow and the kept original (<t>__new_<id>_<time>, <t>__old_<id>_<time>,
// or <t>__n<id> / <t>__o<id> where the long form is too long), and the
// names of jobs recorded by earlier versions (_<t>_new, <t>__new).
const jobTablePattern = `__(new|old)(_[0-9]+_[0-9]{14})?$|__[no][0-9]+$|^_.+_(new|old)$`

// shadowOf is the name of the shadow table a running job builds for table,
// or a name no table has while there is none yet.
func shadowOf(db *sql.DB, table string) string {
	var name string
	err := db.QueryRow("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME REGEXP ?",
		"^"+regexp.QuoteMeta(table)+`__(new_[0-9]+_[0-9]{14}|n[0-9]+)$`).Scan(&name)
	if err != nil {
		return table + "__new"
	}
	return name
}

func leftovers(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME REGEXP ?", jobTablePattern)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		out = append(out, n)
	}
	return out
}

const ddlTestTable = `(id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, k INT NOT NULL, c VARCHAR(64) NOT NULL,
	pad CHAR(32) NOT NULL, u INT NULL, KEY k_idx (k)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`

// mirrored runs writers, one goroutine each: writer w makes statement
// op(w, i) (%s for the table) on t through its connection, then the same
// on ref directly, so that ref is what t must hold.
type mirrored struct {
	once sync.Once
	done chan struct{}
	wg   sync.WaitGroup
	errs chan error
	ops  atomic.Int64
}

func startMirrored(writers []*sql.DB, direct *sql.DB, op func(w, i int) string) *mirrored {
	m := &mirrored{done: make(chan struct{}), errs: make(chan error, len(writers))}
	for w, through := range writers {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-m.done:
					return
				default:
				}
				stmt := op(w, i)
				if _, err := through.Exec(fmt.Sprintf(stmt, "t")); err != nil {
					m.errs <- fmt.Errorf("writer %d on t: %s: %w", w, stmt, err)
					return
				}
				if _, err := direct.Exec(fmt.Sprintf(stmt, "ref")); err != nil {
					m.errs <- fmt.Errorf("writer %d on ref: %w", w, err)
					return
				}
				m.ops.Add(1)
			}
		}()
	}
	return m
}

// stop ends the writers and returns the first error one met.
func (m *mirrored) stop() error {
	m.once.Do(func() { close(m.done) })
	m.wg.Wait()
	select {
	case err := <-m.errs:
		return err
	default:
		return nil
	}
}

// TestDDLAddIndexUnderWrites adds indexes through the proxy to a table of
// 40,000 rows while writers change it through the proxy and directly.
// Every write is made again, identically, to a reference table that never
// sees the job; afterwards both hold the same rows, and the table has the
// definition a native ALTER gives the reference.
func TestDDLAddIndexUnderWrites(t *testing.T) {
	e := newDDLEnv(t)
	const rows = 40000
	e.backend.Exec(t,
		"CREATE TABLE `"+e.db+"`.t "+ddlTestTable,
		"CREATE TABLE `"+e.db+"`.ref "+ddlTestTable,
		"INSERT INTO `"+e.db+"`.t (id, k, c, pad, u) SELECT seq, seq % 1000, CONCAT('row-', seq), MD5(seq), IF(seq % 7 = 0, NULL, seq) FROM mysql.seq_1_to_"+fmt.Sprint(rows),
		"INSERT INTO `"+e.db+"`.ref SELECT * FROM `"+e.db+"`.t")
	app, admin, direct := e.open(t, e.app), e.open(t, e.admin), e.direct(t)

	// Writer w changes only ids congruent to w mod n, so the order between
	// writers never matters. Half write through the proxy, half directly.
	writers := []*sql.DB{app, direct, app, direct}
	n := len(writers)
	next := make([]int, n)
	for w := range next {
		next[w] = rows + n + w - (rows+n)%n // > rows, congruent to w
	}
	m := startMirrored(writers, direct, func(w, i int) string {
		id := (i*7919)%rows + 1
		id += (w - id%n + n) % n // congruent to w
		switch i % 4 {
		case 0:
			next[w] += n
			return fmt.Sprintf("INSERT INTO %%s (id, k, c, pad, u) VALUES (%d, %d, 'new-%d', MD5(%d), %d)", next[w], next[w]%1000, next[w], next[w], next[w])
		case 1:
			return fmt.Sprintf("UPDATE %%s SET k = k + 1, c = CONCAT(LEFT(c, 50), '+'), u = IF(u IS NULL, id + 1000000, NULL) WHERE id = %d", id)
		case 2:
			return fmt.Sprintf("DELETE FROM %%s WHERE id = %d", id)
		}
		// A change of primary key: the row moves.
		next[w] += n
		return fmt.Sprintf("UPDATE %%s SET id = %d WHERE id = %d", next[w], id)
	})
	time.Sleep(200 * time.Millisecond)

	opsBefore, start := m.ops.Load(), time.Now()
	_, err := app.Exec("ALTER TABLE t ADD INDEX idx_c (c), ADD UNIQUE INDEX uq_u (u), ADD KEY (k, pad)")
	took, jobOps := time.Since(start), m.ops.Load()-opsBefore
	time.Sleep(200 * time.Millisecond) // writes after the swap reach the new table
	if err := m.stop(); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("ALTER through the proxy: %v", err)
	}
	t.Logf("job took %s over %d rows; %d writes during the job, %d in all", took, rows, jobOps, m.ops.Load())
	if jobOps < 50 {
		t.Errorf("only %d writes ran during the job; the test proves little", jobOps)
	}

	if _, err := direct.Exec("ALTER TABLE ref ADD INDEX idx_c (c), ADD UNIQUE INDEX uq_u (u), ADD KEY (k, pad)"); err != nil {
		t.Fatal(err)
	}
	if got, want := showCreate(t, direct, "t"), showCreate(t, direct, "ref"); got != want {
		t.Errorf("definition after the job:\n%s\nwant (native ALTER):\n%s", got, want)
	}
	if got, want := tableSum(t, direct, "t"), tableSum(t, direct, "ref"); got != want {
		t.Errorf("rows after the job: %s, want %s; differences:\n%s", got, want, rowDiff(t, direct, "t", "ref"))
	}
	if l := leftovers(t, direct); len(l) > 0 {
		t.Errorf("tables left behind: %v", l)
	}
	// MariaDB has no session settings for its index build (MySQL 8 does):
	// the job asked, and said so.
	if !strings.Contains(e.proxy.stderr.String(), "ddl: index build: the backend has no session settings for it") {
		t.Error("the log does not say which settings the index build ran with")
	}

	// The job is listed, done, with its rows.
	j, err := lastJob(admin)
	if err != nil {
		t.Fatalf("ADMIN SHOW DDL JOBS: %v", err)
	}
	if j.Schema != e.db || j.Table != "t" || j.Type != "add unique index" || j.State != "done" || j.Stage != "done" ||
		j.RowsDone < rows/2 || j.Rate <= 0 || j.ETA.Valid || !j.End.Valid {
		t.Errorf("job row: %+v", j)
	}
	_, err = app.Query("ADMIN SHOW DDL JOBS")
	wantError(t, err, 1227, "Access denied")
}

// TestDDLErrors checks that bad statements get, through the proxy, the
// error MySQL gives for them natively, and change nothing.
func TestDDLErrors(t *testing.T) {
	e := newDDLEnv(t)
	other := e.backend.NewDatabase(t)
	for _, db := range []string{e.db, other} {
		e.backend.Exec(t,
			"CREATE TABLE `"+db+"`.t "+ddlTestTable,
			"INSERT INTO `"+db+"`.t (id, k, c, pad, u) SELECT seq, seq % 10, CONCAT('row-', seq), MD5(seq), seq FROM mysql.seq_1_to_3000",
			"UPDATE `"+db+"`.t SET u = 42 WHERE id = 2500",
			"CREATE TABLE `"+db+"`.nokey (a INT, b INT)",
			"INSERT INTO `"+db+"`.nokey VALUES (1, 2)")
	}
	app := e.open(t, e.app)
	native := testdb.Open(t, testdb.DSN(e.backend.Addr, e.backend.RootUser, e.backend.RootPassword, other, nil))
	direct := e.direct(t)
	before := showCreate(t, direct, "t")
	sumBefore := tableSum(t, direct, "t")
	for _, tc := range []struct {
		sql  string
		code uint16
	}{
		{"ALTER TABLE t ADD INDEX k_idx (c)", 1061},
		{"CREATE INDEX k_idx ON t (c)", 1061},
		{"ALTER TABLE t ADD INDEX a (c), ADD INDEX a (pad)", 1061},
		{"ALTER TABLE t ADD INDEX idx_x (nope)", 1072},
		{"CREATE INDEX idx_x ON t (c, nope)", 1072},
		{"ALTER TABLE t ADD UNIQUE INDEX uq_k (k)", 1062},
		{"CREATE UNIQUE INDEX uq_u ON t (u)", 1062},
		{"ALTER TABLE t ADD INDEX idx_pad (pad(40))", 1089},
		{"ALTER TABLE missing ADD INDEX i (a)", 1146},
	} {
		_, got := app.Exec(tc.sql)
		_, want := native.Exec(tc.sql)
		if mysqlErrNumber(got) != tc.code || fmt.Sprint(got) != strings.ReplaceAll(fmt.Sprint(want), other, e.db) {
			t.Errorf("%s:\n got  %v\n want %v (native)", tc.sql, got, want)
		}
	}
	_, err := app.Exec("ALTER TABLE nokey ADD INDEX ia (a)")
	wantError(t, err, 1173, "primary key")

	if got := showCreate(t, direct, "t"); got != before {
		t.Errorf("definition changed by failed jobs:\n%s\nwas\n%s", got, before)
	}
	if got := tableSum(t, direct, "t"); got != sumBefore {
		t.Errorf("rows changed by failed jobs: %s, were %s", got, sumBefore)
	}
	if l := leftovers(t, direct); len(l) > 0 {
		t.Errorf("tables left behind: %v", l)
	}

	// Duplicates named as MySQL names them.
	_, err = app.Exec("CREATE UNIQUE INDEX uq_u ON t (u)")
	wantError(t, err, 1062, "Duplicate entry '42' for key 'uq_u'")

	// The same statements succeed once the data allows them; CREATE INDEX
	// without a name for ALTER takes the column's name, as MySQL does.
	if _, err := app.Exec("UPDATE t SET u = NULL WHERE id = 2500"); err != nil {
		t.Fatal(err)
	}
	if _, err := native.Exec("UPDATE t SET u = NULL WHERE id = 2500"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"CREATE UNIQUE INDEX uq_u ON t (u)", "ALTER TABLE t ADD INDEX (c), ADD INDEX (c)"} {
		if _, err := app.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if _, err := native.Exec(s); err != nil {
			t.Fatalf("native %s: %v", s, err)
		}
	}
	if got, want := showCreate(t, direct, "t"), showCreate(t, native, "t"); got != want {
		t.Errorf("definition:\n%s\nwant (native):\n%s", got, want)
	}
	if l := leftovers(t, direct); len(l) > 0 {
		t.Errorf("tables left behind: %v", l)
	}
}

// TestDDLJobsSurviveRestart checks that past jobs are still listed after
// the proxy restarts, and that other DDL passes through untouched.
func TestDDLJobsSurviveRestart(t *testing.T) {
	e := newDDLEnv(t)
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.t "+ddlTestTable,
		"INSERT INTO `"+e.db+"`.t (k, c, pad) VALUES (1, 'a', 'b'), (2, 'c', 'd')")
	app := e.open(t, e.app)
	if _, err := app.Exec("CREATE INDEX ic ON t (c)"); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Exec("ALTER TABLE t ADD INDEX ip (pad), ADD COLUMN z INT"); err != nil {
		t.Fatal(err) // not only ADD INDEX: the backend runs it
	}
	e.proxy.stop(t)
	e.start(t)
	admin := e.open(t, e.admin)
	list, err := showJobs(admin)
	if err != nil {
		t.Fatal(err)
	}
	var jobs []string
	for _, j := range list {
		jobs = append(jobs, fmt.Sprintf("%s %s %s rows=%d %s", j.Table, j.Type, j.State, j.RowsDone, j.Query.String))
	}
	if len(jobs) != 1 || !regexp.MustCompile(`^t add index done rows=2 CREATE INDEX ic ON t \(c\)$`).MatchString(jobs[0]) {
		t.Errorf("jobs after a restart: %q", jobs)
	}
}

// rowDiff lists up to 20 rows that one table has and the other lacks.
func rowDiff(t *testing.T, db *sql.DB, a, b string) string {
	t.Helper()
	var out strings.Builder
	for _, pair := range [][2]string{{a, b}, {b, a}} {
		rows, err := db.Query(fmt.Sprintf("SELECT x.id, x.k, x.c, IFNULL(x.u, -1) FROM `%s` x LEFT JOIN `%s` y ON x.id = y.id AND x.k = y.k AND x.c = y.c AND x.pad = y.pad AND x.u <=> y.u WHERE y.id IS NULL LIMIT 20", pair[0], pair[1]))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id, k, u int64
			var c string
			rows.Scan(&id, &k, &c, &u)
			fmt.Fprintf(&out, "only in %s: id=%d k=%d c=%s u=%d\n", pair[0], id, k, c, u)
		}
		rows.Close()
	}
	return out.String()
}

// TestDDLDuplicateDuringJob: a writer that bypasses the proxy creates a
// duplicate for the new UNIQUE index while the job copies. The job fails
// with 1062 naming the value, the table keeps its definition and every
// row, and nothing is left behind.
func TestDDLDuplicateDuringJob(t *testing.T) {
	e := newDDLEnv(t)
	e.seed(t, 60000)
	app, direct := e.open(t, e.app), e.direct(t)
	before := showCreate(t, direct, "t")
	done := make(chan error, 1)
	go func() {
		_, err := app.Exec("ALTER TABLE t ADD UNIQUE INDEX uq_u (u)")
		done <- err
	}()
	waitFor(t, 10*time.Second, "the job to copy rows", func() (bool, error) {
		var n int
		err := direct.QueryRow("SELECT COUNT(*) FROM `" + shadowOf(direct, "t") + "`").Scan(&n)
		return err == nil && n > 0, err
	})
	if _, err := direct.Exec("UPDATE t SET u = 777 WHERE id = 59999"); err != nil {
		t.Fatal(err)
	}
	err := <-done
	wantError(t, err, 1062, "Duplicate entry '777' for key 'uq_u'")
	if got := showCreate(t, direct, "t"); got != before {
		t.Errorf("definition changed by the failed job:\n%s", got)
	}
	var n, u int
	if err := direct.QueryRow("SELECT COUNT(*), SUM(u = 777) FROM t").Scan(&n, &u); err != nil || n != 60000 || u != 2 {
		t.Errorf("rows after the failed job: %d (%d with u = 777), %v", n, u, err)
	}
	if l := leftovers(t, direct); len(l) > 0 {
		t.Errorf("tables left behind: %v", l)
	}
}

// TestDDLCompositeStringKey walks a table whose primary key is a latin1
// string with a case-insensitive collation and an unsigned integer, while
// rows change through the proxy and directly, keys included.
func TestDDLCompositeStringKey(t *testing.T) {
	e := newDDLEnv(t)
	const schema = `(region VARCHAR(16) CHARACTER SET latin1 COLLATE latin1_swedish_ci NOT NULL,
		n INT UNSIGNED NOT NULL, v VARCHAR(32) CHARACTER SET utf8mb4 NOT NULL, b VARBINARY(8) NULL,
		PRIMARY KEY (region, n)) ENGINE=InnoDB`
	regions := []string{"Zürich", "Åre", "ÖREBRO", "oslo", "Bergen", "malmö", "Ærø", "Kraków"}
	var values []string
	for i, r := range regions {
		values = append(values, fmt.Sprintf("SELECT '%s' AS region, seq + %d AS n FROM mysql.seq_1_to_2500", r, 4294960000-i*7))
	}
	e.backend.Exec(t,
		"CREATE TABLE `"+e.db+"`.t "+schema,
		"CREATE TABLE `"+e.db+"`.ref "+schema,
		"INSERT INTO `"+e.db+"`.t SELECT region, n, CONCAT('v·', n), UNHEX(HEX(n)) FROM ("+strings.Join(values, " UNION ALL ")+") x",
		"INSERT INTO `"+e.db+"`.ref SELECT * FROM `"+e.db+"`.t")
	app, direct := e.open(t, e.app), e.direct(t)
	m := startMirrored([]*sql.DB{app, direct}, direct, func(w, i int) string {
		r := regions[(2*i+w)%len(regions)] // writer w owns every other region
		n := 4294960000 - ((2*i+w)%len(regions))*7 + 1 + (i*37)%2500
		switch i % 3 {
		case 0:
			return fmt.Sprintf("UPDATE %%s SET v = CONCAT(v, '+'), b = NULL WHERE region = '%s' AND n = %d", r, n)
		case 1:
			return fmt.Sprintf("DELETE FROM %%s WHERE region = '%s' AND n = %d", r, n)
		}
		return fmt.Sprintf("INSERT INTO %%s VALUES ('%s', %d, 'again', NULL) ON DUPLICATE KEY UPDATE v = 'dup'", strings.ToUpper(r), n)
	})
	time.Sleep(100 * time.Millisecond)
	opsBefore := m.ops.Load()
	_, err := app.Exec("CREATE INDEX iv ON t (v(8), b)")
	if n := m.ops.Load() - opsBefore; n < 50 {
		t.Errorf("only %d writes during the job", n)
	}
	if err := m.stop(); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("CREATE INDEX through the proxy: %v", err)
	}
	if _, err := direct.Exec("CREATE INDEX iv ON ref (v(8), b)"); err != nil {
		t.Fatal(err)
	}
	if got, want := showCreate(t, direct, "t"), showCreate(t, direct, "ref"); got != want {
		t.Errorf("definition:\n%s\nwant:\n%s", got, want)
	}
	sum := func(table string) string {
		var n int64
		var x string
		if err := direct.QueryRow("SELECT COUNT(*), IFNULL(BIT_XOR(CRC32(CONCAT_WS('#', HEX(region), n, HEX(v), IFNULL(HEX(b), 'null')))), 0) FROM "+table).Scan(&n, &x); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d rows, xor %s", n, x)
	}
	if got, want := sum("t"), sum("ref"); got != want {
		t.Errorf("rows: %s, want %s", got, want)
	}
	if l := leftovers(t, direct); len(l) > 0 {
		t.Errorf("tables left behind: %v", l)
	}
}

// TestDDLProxyKilledDuringJob: kill -9 the proxy while a job copies. The
// original table is untouched and serving; the restarted proxy resumes the
// job from its checkpoint and finishes it, leaving nothing behind.
func TestDDLProxyKilledDuringJob(t *testing.T) {
	e := newDDLEnv(t)
	e.seed(t, 150000)
	direct := e.direct(t)
	before, sumBefore := showCreate(t, direct, "t"), tableSum(t, direct, "t")

	// A proxy this test kills: started without the harness's stop check.
	e.proxy.stop(t)
	dir := t.TempDir()
	cfg := dir + "/tableproxy.yaml"
	yaml := fmt.Sprintf("plugins:\n  - name: ddloffload\n    options: {strategy: backfill, workers: 2, chunk_rows: 1000, binlog_user: %s}\n", e.admin.name)
	if err := writeFile(cfg, yaml); err != nil {
		t.Fatal(err)
	}
	doomed := launchProxy(t, cfg, e.dataDir, e.backend.Addr, freePort(t), []account{e.app}, []account{e.admin})
	if err := doomed.waitReady(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	app := testdb.Open(t, testdb.DSN(doomed.addr, e.app.name, e.app.password, e.db, nil))
	go app.Exec("ALTER TABLE t ADD INDEX idx_c (c)")
	waitFor(t, 10*time.Second, "the job to copy rows", func() (bool, error) {
		var n int
		err := direct.QueryRow("SELECT COUNT(*) FROM `" + shadowOf(direct, "t") + "`").Scan(&n)
		return err == nil && n > 0, err
	})
	// Other sessions watch it run.
	watcher := testdb.Open(t, testdb.DSN(doomed.addr, e.admin.name, e.admin.password, e.db, nil))
	waitFor(t, 10*time.Second, "ADMIN SHOW DDL JOBS to show progress", func() (bool, error) {
		j, err := lastJob(watcher)
		return err == nil && j.State == "running" && j.Stage == "backfill" && j.RowsDone > 0 && j.Estimate > 100000 &&
				j.Rate > 0 && j.ETA.Valid && !j.End.Valid,
			fmt.Errorf("%+v %v", j, err)
	})
	_ = doomed.cmd.Process.Kill()
	<-doomed.done

	e.start(t)
	admin := e.open(t, e.admin)
	j := waitJob(t, admin, 60*time.Second, "the resumed job to end", func(j ddlJob) bool { return j.State != "running" })
	if j.State != "done" || j.RowsDone < 150000 {
		t.Errorf("job after the restart: %+v", j)
	}
	if got := showCreate(t, direct, "t"); !strings.Contains(got, "KEY `idx_c` (`c`)") || strings.Replace(got, ",\n  KEY `idx_c` (`c`)", "", 1) != before {
		t.Errorf("definition:\n%s\nwas\n%s", got, before)
	}
	if got := tableSum(t, direct, "t"); got != sumBefore {
		t.Errorf("rows changed: %s, were %s", got, sumBefore)
	}
	if l := leftovers(t, direct); len(l) > 0 {
		t.Errorf("tables left behind: %v", l)
	}
}

func writeFile(path, content string) error {
	return os.WriteFile(path, []byte(fmt.Sprintf("shutdown_timeout: %s\n%s", shutdownTimeout, content)), 0o600)
}

// TestDDLTableChangedDuringJob: DDL on the table that bypasses the proxy
// while the job copies fails the job cleanly.
func TestDDLTableChangedDuringJob(t *testing.T) {
	e := newDDLEnv(t)
	e.seed(t, 100000)
	app, direct := e.open(t, e.app), e.direct(t)
	done := make(chan error, 1)
	go func() {
		_, err := app.Exec("ALTER TABLE t ADD INDEX idx_c (c)")
		done <- err
	}()
	waitFor(t, 10*time.Second, "the job to copy rows", func() (bool, error) {
		var n int
		err := direct.QueryRow("SELECT COUNT(*) FROM `" + shadowOf(direct, "t") + "`").Scan(&n)
		return err == nil && n > 0, err
	})
	// Through the proxy, DDL on the table waits for the job's end instead.
	_, err := app.Exec("ALTER TABLE t ADD COLUMN y INT")
	wantError(t, err, 1205, "is adding an index to")
	_, err = app.Exec("CREATE INDEX other ON t (pad)")
	wantError(t, err, 1235, "is already adding an index to")
	if _, err := direct.Exec("ALTER TABLE t ADD COLUMN z INT"); err != nil {
		t.Fatal(err)
	}
	wantError(t, <-done, 1105, "was changed by a statement during the job")
	if ddl := showCreate(t, direct, "t"); !strings.Contains(ddl, "`z` int") || strings.Contains(ddl, "idx_c") {
		t.Errorf("definition after the failed job:\n%s", ddl)
	}
	if l := leftovers(t, direct); len(l) > 0 {
		t.Errorf("tables left behind: %v", l)
	}
}

// TestDDLSessionCases: what the name means in the client's session decides:
// a temporary table and a view go to the backend as they are, and an open
// transaction is committed first, as MySQL does for DDL.
func TestDDLSessionCases(t *testing.T) {
	e := newDDLEnv(t)
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.t "+ddlTestTable, "CREATE VIEW `"+e.db+"`.v AS SELECT * FROM `"+e.db+"`.t")
	if jobs, err := showJobs(e.open(t, e.admin)); err != nil || len(jobs) != 0 {
		t.Errorf("ADMIN SHOW DDL JOBS with no jobs: %v, %v", jobs, err)
	}
	ctx := context.Background()
	conn := e.session(t, "CREATE TEMPORARY TABLE tmp (id INT PRIMARY KEY, a INT)", "ALTER TABLE tmp ADD INDEX ia (a)")
	_, err := conn.ExecContext(ctx, "ALTER TABLE v ADD INDEX ic (c)")
	wantError(t, err, 1347, "is not of type 'BASE TABLE'")
	for _, s := range []string{"BEGIN", "INSERT INTO t (k, c, pad) VALUES (1, 'in-tx', 'x')", "ALTER TABLE t ADD INDEX ic (c)", "ROLLBACK"} {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	var n int
	if err := e.direct(t).QueryRow("SELECT COUNT(*) FROM t WHERE c = 'in-tx'").Scan(&n); err != nil || n != 1 {
		t.Errorf("the insert before the ALTER: %d rows, %v (want it committed)", n, err)
	}
	if ddl := showCreate(t, e.direct(t), "t"); !strings.Contains(ddl, "KEY `ic` (`c`)") {
		t.Errorf("index missing:\n%s", ddl)
	}
}

// TestDDLAfterDeferredBegin: with the cache on the chain, a BEGIN is
// answered by the proxy and reaches the backend only with the
// transaction's first statement there, here an ADD INDEX the job takes
// over. The ALTER ends the transaction as DDL does: the client is told it
// is no longer in one (so a later job's cut-over does not wait for the
// idle session), and its next write commits on its own, visible to
// everyone at once.
func TestDDLAfterDeferredBegin(t *testing.T) {
	e := newDDLEnv(t)
	e.proxy.stop(t)
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.t "+ddlTestTable, "CREATE TABLE `"+e.db+"`.small (id INT PRIMARY KEY)")
	yaml := fmt.Sprintf("plugins:\n  - name: cache\n  - name: ddloffload\n    options: {strategy: backfill, old_table_retention: 0, binlog_user: %s}\n", e.admin.name)
	e.proxy = startProxyOpts(t, e.backend.Addr, []account{e.app}, proxyOpts{yaml: yaml, admins: []account{e.admin}, dataDir: e.dataDir})
	if _, err := e.open(t, e.admin).Exec("ALTER TABLE small CACHE"); err != nil {
		t.Fatal(err) // a cached table: the cache now answers a plain BEGIN
	}
	ctx := context.Background()
	conn := e.session(t, "BEGIN", "ALTER TABLE t ADD INDEX ic (c)")
	// The session now idles outside a transaction: another job's cut-over
	// has no transaction of it to wait for.
	if _, err := e.open(t, e.app).Exec("ALTER TABLE t ADD INDEX ik (k)"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(e.proxy.stderr.String(), "cut-over goes on with transactions still open") {
		t.Error("the second job's cut-over waited for the first ALTER's session, told it was still in a transaction")
	}
	if _, err := conn.ExecContext(ctx, "INSERT INTO t (k, c, pad) VALUES (1, 'after', 'x')"); err != nil {
		t.Fatal(err)
	}
	var inTx int
	if err := conn.QueryRowContext(ctx, "SELECT @@in_transaction").Scan(&inTx); err != nil || inTx != 0 {
		t.Errorf("in a transaction after the ALTER: %d, %v", inTx, err)
	}
	var n int
	if err := e.direct(t).QueryRow("SELECT COUNT(*) FROM t WHERE c = 'after'").Scan(&n); err != nil || n != 1 {
		t.Errorf("the write after the ALTER, seen by another session: %d rows, %v (want it committed)", n, err)
	}
	if ddl := showCreate(t, e.direct(t), "t"); !strings.Contains(ddl, "KEY `ic` (`c`)") {
		t.Errorf("index missing:\n%s", ddl)
	}
}

// TestDDLCutOverWaitsForLongTransaction: a transaction that bypasses the
// proxy keeps a write on the table open across the cut-over. The swap
// gives up within its bound, releases everything, and succeeds once the
// transaction ends; the transaction's write is in the new table.
func TestDDLCutOverWaitsForLongTransaction(t *testing.T) {
	e := newDDLEnv(t)
	e.proxy.stop(t)
	yaml := fmt.Sprintf("plugins:\n  - name: ddloffload\n    options: {strategy: backfill, workers: 1, chunk_rows: 500, old_table_retention: 0, cutover_hold: 1s, cutover_attempts: 10, binlog_user: %s}\n", e.admin.name)
	e.proxy = startProxyOpts(t, e.backend.Addr, []account{e.app}, proxyOpts{yaml: yaml, admins: []account{e.admin}, dataDir: e.dataDir})
	e.seed(t, 200000)
	app, direct := e.open(t, e.app), e.direct(t)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := app.Exec("ALTER TABLE t ADD INDEX idx_c (c)")
		done <- err
	}()
	// Verify freezes the table for a moment at its start, then compares
	// checksums for a while: open the transaction once the checksums run,
	// so that it is still open when the cut-over begins.
	waitFor(t, 60*time.Second, "the job's checksums to run", func() (bool, error) {
		var n int
		err := direct.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = ? AND INFO LIKE 'SELECT COUNT(*), IFNULL(BIT_XOR(CRC32(%'", e.app.name).Scan(&n)
		return n > 0, err
	})
	tx, err := direct.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("UPDATE t SET c = 'held' WHERE id = 7"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("ALTER: %v", err)
	}
	t.Logf("job took %s", time.Since(start))
	if !strings.Contains(e.proxy.stderr.String(), "cut-over attempt abandoned") {
		t.Errorf("the cut-over never had to wait; the test proves little")
	}
	var c string
	if err := direct.QueryRow("SELECT c FROM t WHERE id = 7").Scan(&c); err != nil || c != "held" {
		t.Errorf("row 7 after the job: %q, %v", c, err)
	}
	if ddl := showCreate(t, direct, "t"); !strings.Contains(ddl, "KEY `idx_c` (`c`)") {
		t.Errorf("index missing:\n%s", ddl)
	}
}

// TestDDLCancel: ADMIN CANCEL DDL JOBS stops a running job; its client gets
// error 1317, the table is untouched, and the shadow is gone.
func TestDDLCancel(t *testing.T) {
	e := newDDLEnv(t)
	e.seed(t, 200000)
	app, admin, direct := e.open(t, e.app), e.open(t, e.admin), e.direct(t)
	before := showCreate(t, direct, "t")
	done := make(chan error, 1)
	go func() {
		_, err := app.Exec("ALTER TABLE t ADD INDEX idx_c (c)")
		done <- err
	}()
	var id int64
	waitFor(t, 10*time.Second, "the job to copy", func() (bool, error) {
		j, err := lastJob(admin)
		id = j.ID
		return err == nil && j.Stage == "backfill" && j.RowsDone > 0, err
	})
	var gotID int64
	var result string
	if err := admin.QueryRow(fmt.Sprintf("ADMIN CANCEL DDL JOBS %d", id)).Scan(&gotID, &result); err != nil || gotID != id || result != "successful" {
		t.Fatalf("ADMIN CANCEL DDL JOBS %d: %d %q %v", id, gotID, result, err)
	}
	wantError(t, <-done, 1317, "interrupted")
	if err := admin.QueryRow(fmt.Sprintf("ADMIN CANCEL DDL JOBS %d", id)).Scan(&gotID, &result); err != nil || !strings.Contains(result, "finished") {
		t.Errorf("cancelling a finished job: %q %v", result, err)
	}
	if j, err := lastJob(admin); err != nil || j.State != "cancelled" {
		t.Errorf("job after cancelling: %+v, %v", j, err)
	}
	if got := showCreate(t, direct, "t"); got != before {
		t.Errorf("definition changed:\n%s", got)
	}
	if l := leftovers(t, direct); len(l) > 0 {
		t.Errorf("tables left behind: %v", l)
	}
}

// TestDDLRecoversSwappedJob: a proxy stopped between its RENAME and the
// record of it left a job "running" at cut-over, the new table in place and
// the old one renamed. The next start sees the swap happened: the job is
// done and the old table is dropped (retention 0).
func TestDDLRecoversSwappedJob(t *testing.T) {
	e := newDDLEnv(t)
	e.proxy.stop(t)
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.t "+ddlTestTable, "CREATE TABLE `"+e.db+"`._t_old "+ddlTestTable,
		"CREATE TABLE `"+e.db+"`.u "+ddlTestTable, "CREATE TABLE `"+e.db+"`._u_new "+ddlTestTable)
	jobs := fmt.Sprintf(`[{"id": 7, "schema": %q, "table": "t", "type": "add index", "user": %q, "state": "running", "stage": "cut-over", "start": "2026-01-01T00:00:00Z", "shadow": "_t_new", "old": "_t_old"},
{"id": 8, "schema": %q, "table": "u", "type": "add index", "user": %q, "state": "running", "stage": "cut-over", "start": "2026-01-01T00:00:00Z", "shadow": "_u_new", "old": "_u_old"}]`,
		e.db, e.app.name, e.db, e.app.name)
	if err := os.WriteFile(e.dataDir+"/ddl_jobs.json", []byte(jobs), 0o600); err != nil {
		t.Fatal(err)
	}
	e.start(t)
	direct := e.direct(t)
	waitFor(t, 10*time.Second, "the old table and the shadow to be dropped", func() (bool, error) {
		l := leftovers(t, direct)
		return len(l) == 0, fmt.Errorf("left: %v", l)
	})
	// Each job is settled in the background, its tables dropped before its
	// state is recorded: wait for both.
	admin := e.open(t, e.admin)
	waitFor(t, 10*time.Second, "the jobs to be settled as 8 failed, 7 done", func() (bool, error) {
		list, err := showJobs(admin)
		if err != nil {
			return false, err
		}
		var got []string
		for _, j := range list {
			got = append(got, fmt.Sprintf("%d %s %s", j.ID, j.Table, j.State))
		}
		return strings.Join(got, ", ") == "8 u failed, 7 t done", fmt.Errorf("jobs after the restart: %v", got)
	})
}

// TestDDLPauseResume: ADMIN PAUSE DDL JOBS stops the copy at its next
// chunk while writes go on; ADMIN RESUME DDL JOBS lets it finish, with
// the writes made meanwhile.
func TestDDLPauseResume(t *testing.T) {
	e := newDDLEnv(t)
	e.seed(t, 200000)
	app, admin, direct := e.open(t, e.app), e.open(t, e.admin), e.direct(t)
	done := make(chan error, 1)
	go func() {
		_, err := app.Exec("ALTER TABLE t ADD INDEX idx_c (c)")
		done <- err
	}()
	var j ddlJob
	waitFor(t, 30*time.Second, "the job to copy", func() (bool, error) {
		var err error
		j, err = lastJob(admin)
		return err == nil && j.Stage == "backfill" && j.RowsDone > 0, err
	})
	admin1 := func(verb string) string {
		var id int64
		var result string
		if err := admin.QueryRow(fmt.Sprintf("ADMIN %s DDL JOBS %d", verb, j.ID)).Scan(&id, &result); err != nil {
			t.Fatalf("ADMIN %s DDL JOBS: %v", verb, err)
		}
		return result
	}
	if r := admin1("PAUSE"); r != "successful" {
		t.Fatalf("pause: %s", r)
	}
	var paused ddlJob
	waitFor(t, 10*time.Second, "the copy to stop", func() (bool, error) {
		before, err := lastJob(admin)
		time.Sleep(300 * time.Millisecond)
		paused, _ = lastJob(admin)
		return err == nil && paused.State == "paused" && paused.RowsDone == before.RowsDone, err
	})
	if paused.RowsDone >= 200000 {
		t.Fatalf("the copy finished before the pause took effect: %+v", paused)
	}
	if _, err := app.Exec("UPDATE t SET c = 'while paused' WHERE id = 199999"); err != nil {
		t.Fatal(err)
	}
	if r := admin1("RESUME"); r != "successful" {
		t.Fatalf("resume: %s", r)
	}
	if r := admin1("RESUME"); !strings.Contains(r, "not paused") {
		t.Errorf("second resume: %s", r)
	}
	if err := <-done; err != nil {
		t.Fatalf("ALTER: %v", err)
	}
	var c string
	if err := direct.QueryRow("SELECT c FROM t FORCE INDEX (idx_c) WHERE c = 'while paused'").Scan(&c); err != nil {
		t.Errorf("the write made while paused: %v", err)
	}
	if r := admin1("PAUSE"); !strings.Contains(r, "finished") {
		t.Errorf("pausing a finished job: %s", r)
	}
}
