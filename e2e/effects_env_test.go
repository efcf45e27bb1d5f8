package e2e

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	drv "github.com/go-sql-driver/mysql"

	"tableproxy/internal/sqllex"
	"tableproxy/internal/testdb"
	"tableproxy/plugins"
)

// effectsEnv is a proxy caching kv, the uncached tables, stored programs,
// users and roles the forms use, a writer that may do anything, a reader
// of kv that never stops, and the backend's binary log.
type effectsEnv struct {
	*cacheEnv
	db2      string
	dialect  sqllex.Dialect
	root     *sql.DB // the backend, directly
	adminDB  *sql.DB // the proxy, as its admin
	writerDB *sql.DB // the proxy, as the writer (multi-statements; every connection new)
	nextRead *sql.DB // the proxy, as the app: the read right after a request
	writer   account
	watch    *binlogWatch
	bg       *bgReader
	x        *expander
	counter  atomic.Int64
	prefix   string // of the run's throwaway users, roles and names

	mu      sync.Mutex
	cleanup []string // statements that drop what the forms made

	// lastRequest is the request run last; missedSeen, kv's count of
	// writes that escaped the account when it was checked last (see
	// checkMissed).
	lastRequest string
	missedSeen  int64
}

// checkMissed fails the test when the binary log showed a write of kv by a
// statement sent through the proxy whose account did not name it, since
// the last check (the log has caught up: kv has settled).
func (e *effectsEnv) checkMissed(t *testing.T) {
	t.Helper()
	var n sql.NullInt64
	if err := e.adminDB.QueryRow("SELECT missed_writes FROM tableproxy.cached_tables WHERE table_name = 'kv' AND state <> 'dropped'").Scan(&n); err != nil && err != sql.ErrNoRows {
		t.Fatal(err)
	}
	if n.Int64 > e.missedSeen {
		t.Errorf("the binary log showed %d write(s) of kv that escaped the account, by the request:\n  %s", n.Int64-e.missedSeen, e.lastRequest)
	}
	e.missedSeen = n.Int64
}

const kvRead = "SELECT id, v FROM kv ORDER BY id"

func newEffectsEnv(t *testing.T) *effectsEnv {
	e := &effectsEnv{cacheEnv: newCacheEnv(t)}
	b := e.backend
	e.db2 = b.NewDatabase(t)
	e.root = b.Root(t)
	var version string
	if err := e.root.QueryRow("SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	e.dialect = sqllex.DialectOf(version)
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	e.prefix = "tpe" + hex.EncodeToString(rnd[:])
	e.counter.Store(1000)
	db, db2 := "`"+e.db+"`", "`"+e.db2+"`"
	role := e.prefix + "_role"
	user := "'" + e.prefix + "_user'@'localhost'"
	e.writer = account{e.prefix + "_w", "writer-pw"}
	hosts := []string{"127.0.0.1", "localhost", "::1"}
	t.Cleanup(func() {
		root := b.Root(t)
		for _, h := range hosts {
			root.Exec(fmt.Sprintf("DROP USER IF EXISTS '%s'@'%s'", e.writer.name, h))
		}
		root.Exec("DROP USER IF EXISTS " + user)
		root.Exec("DROP ROLE IF EXISTS " + role)
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, q := range e.cleanup {
			root.Exec(q)
		}
	})
	setup := []string{
		"CREATE TABLE " + db + ".kv (id INT PRIMARY KEY, v BIGINT NOT NULL)",
		"INSERT INTO " + db + ".kv VALUES (1, 0), (2, 0), (3, 0)",
		"CREATE TABLE " + db + ".other (id INT PRIMARY KEY, v BIGINT NOT NULL)",
		"INSERT INTO " + db + ".other VALUES (1, 0), (2, 0), (3, 0)",
		"CREATE TABLE " + db + ".log (id INT AUTO_INCREMENT PRIMARY KEY, msg VARCHAR(64))",
		"CREATE SEQUENCE " + db + ".seq CACHE 0",
		"CREATE TABLE " + db + ".trig (id INT PRIMARY KEY, v BIGINT NOT NULL)",
		"CREATE TRIGGER " + db + ".trig_ai AFTER INSERT ON " + db + ".trig FOR EACH ROW UPDATE kv SET v = NEW.v WHERE id = 2",
		"CREATE TRIGGER " + db + ".trig_au AFTER UPDATE ON " + db + ".trig FOR EACH ROW UPDATE kv SET v = NEW.v WHERE id = 2",
		"CREATE TABLE " + db + ".trigo (id INT PRIMARY KEY, v BIGINT NOT NULL)",
		"CREATE TRIGGER " + db + ".trigo_ai AFTER INSERT ON " + db + ".trigo FOR EACH ROW UPDATE other SET v = NEW.v WHERE id = 2",
		"CREATE VIEW " + db + ".kvview AS SELECT id, v FROM " + db + ".kv",
		"CREATE TABLE " + db + ".vers (id INT PRIMARY KEY, v BIGINT NOT NULL) WITH SYSTEM VERSIONING",
		"INSERT INTO " + db + ".vers VALUES (1, 0)",
		"CREATE PROCEDURE " + db + ".p_kv(x BIGINT) UPDATE kv SET v = x WHERE id = 1",
		"CREATE PROCEDURE " + db + ".p_other(x BIGINT) UPDATE other SET v = x WHERE id = 1",
		"CREATE PROCEDURE " + db + ".p_read() SELECT id, v FROM kv ORDER BY id",
		"CREATE FUNCTION " + db + ".f_kv(x BIGINT) RETURNS BIGINT DETERMINISTIC MODIFIES SQL DATA BEGIN UPDATE kv SET v = x WHERE id = 1; RETURN x; END",
		"CREATE FUNCTION " + db + ".f_other(x BIGINT) RETURNS BIGINT DETERMINISTIC MODIFIES SQL DATA BEGIN UPDATE other SET v = x WHERE id = 1; RETURN x; END",
		"CREATE FUNCTION " + db + ".f_pure(x BIGINT) RETURNS BIGINT DETERMINISTIC NO SQL RETURN x + 1",
		"CREATE TABLE " + db2 + ".kv (id INT PRIMARY KEY, v BIGINT NOT NULL)",
		"INSERT INTO " + db2 + ".kv VALUES (1, 0), (2, 0), (3, 0)",
		"CREATE TABLE " + db2 + ".t2 (id INT PRIMARY KEY, v BIGINT NOT NULL)",
		"INSERT INTO " + db2 + ".t2 VALUES (1, 0), (2, 0), (3, 0)",
		"CREATE ROLE " + role,
		"GRANT SELECT ON " + db + ".* TO " + role,
		"CREATE USER " + user + " IDENTIFIED BY 'throwaway-pw'",
		"GRANT " + role + " TO " + user,
	}
	for _, h := range hosts {
		w := fmt.Sprintf("'%s'@'%s'", e.writer.name, h)
		setup = append(setup, "CREATE USER "+w+" IDENTIFIED BY '"+e.writer.password+"'",
			"GRANT ALL PRIVILEGES ON *.* TO "+w+" WITH GRANT OPTION", "GRANT "+role+" TO "+w+" WITH ADMIN OPTION")
	}
	b.Exec(t, setup...)
	e.proxy.stop(t)
	e.more = []account{e.writer}
	e.start(t)

	e.adminDB = e.open(t, e.admin)
	if _, err := e.adminDB.Exec("ALTER TABLE kv CACHE"); err != nil {
		t.Fatal(err)
	}
	waitState(t, e.adminDB, "kv", "ready", 3, 1)
	e.writerDB = testdb.Open(t, testdb.DSN(e.proxy.addr, e.writer.name, e.writer.password, e.db, map[string]string{"multiStatements": "true"}))
	e.writerDB.SetMaxIdleConns(0) // every form on a session of its own
	e.nextRead = e.open(t, e.app)
	e.nextRead.SetMaxOpenConns(1)

	e.x = &expander{
		fixed: map[string]string{"db": e.db, "db2": e.db2, "kv": "kv", "other": "other", "log": "log", "seq": "seq",
			"trig": "trig", "trigo": "trigo", "kvview": "kvview", "vers": "vers", "user": user, "role": role},
		// (Far apart: a form that writes {{n}} + i never writes what the
		// next form's {{n}} is, which would change no row.)
		next:  func() int64 { return e.counter.Add(1) * 100 },
		names: e.formNames,
	}
	ours := []string{e.db, e.db2, e.prefix}
	e.watch = watchBinlog(t, b, e.root, []string{e.db, e.db2}, func(schema, q string) bool {
		for _, s := range ours {
			if schema == s || strings.Contains(q, s) {
				return true
			}
		}
		return false
	})
	e.bg = startBgReader(t, e.open(t, e.app))
	return e
}

// formNames makes the names of one form's own objects, and remembers to
// drop its users and roles.
func (e *effectsEnv) formNames() formNames {
	n := e.counter.Add(1)
	fn := formNames{new: fmt.Sprintf("nt_%d", n), new2: fmt.Sprintf("nt_%d_b", n), prog: fmt.Sprintf("np_%d", n),
		newuser: fmt.Sprintf("'%s_u%d'@'localhost'", e.prefix, n), newuser2: fmt.Sprintf("'%s_u%d_b'@'localhost'", e.prefix, n), newrole: fmt.Sprintf("%s_r%d", e.prefix, n)}
	e.mu.Lock()
	e.cleanup = append(e.cleanup, "DROP USER IF EXISTS "+fn.newuser, "DROP USER IF EXISTS "+fn.newuser2,
		"DROP ROLE IF EXISTS "+fn.newrole)
	e.mu.Unlock()
	return fn
}

// placeholder names a table the log shows as the forms' directives do.
func (e *effectsEnv) placeholder(n tableName) string {
	name := strings.ToLower(n.table)
	if strings.HasPrefix(name, "nt_") {
		name = "new"
	}
	switch {
	case strings.EqualFold(n.schema, e.db):
		return name
	case strings.EqualFold(n.schema, e.db2):
		return "db2." + name
	}
	return n.String()
}

// bgReader reads kv through the proxy, on a connection of its own, in a
// loop. Each read is tagged with the epoch current when it was sent: the
// runner starts an epoch when a request has been acknowledged, and every
// read of that epoch must see the request's changes.
type bgReader struct {
	epoch atomic.Int64
	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	cond  *sync.Cond
	reads map[int64][]string // epoch -> what its reads returned
}

func startBgReader(t *testing.T, db *sql.DB) *bgReader {
	db.SetMaxOpenConns(1)
	r := &bgReader{stop: make(chan struct{}), done: make(chan struct{}), reads: map[int64][]string{}}
	r.cond = sync.NewCond(&r.mu)
	go func() {
		defer close(r.done)
		for {
			select {
			case <-r.stop:
				return
			default:
			}
			ep := r.epoch.Load()
			got := readKV(db)
			r.mu.Lock()
			if len(r.reads[ep]) < 4 {
				r.reads[ep] = append(r.reads[ep], got)
			}
			r.cond.Broadcast()
			r.mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()
	t.Cleanup(func() {
		close(r.stop)
		<-r.done
	})
	return r
}

// begin starts an epoch: the reads sent from now on.
func (r *bgReader) begin() int64 {
	ep := r.epoch.Add(1)
	r.mu.Lock()
	delete(r.reads, ep-2)
	r.mu.Unlock()
	return ep
}

// first waits for the first read of epoch ep.
func (r *bgReader) first(ep int64) (string, bool) {
	deadline := time.Now().Add(5 * time.Second)
	timer := time.AfterFunc(5*time.Second, func() {
		r.mu.Lock()
		r.cond.Broadcast()
		r.mu.Unlock()
	})
	defer timer.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.reads[ep]) == 0 {
		if time.Now().After(deadline) {
			return "", false
		}
		r.cond.Wait()
	}
	return r.reads[ep][0], true
}

// readKV renders kv's rows as one read returns them (or its error).
func readKV(db interface {
	Query(string, ...any) (*sql.Rows, error)
}) string {
	rows, err := db.Query(kvRead)
	if err != nil {
		return fmt.Sprintf("error %d", mysqlErrNumber(err))
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, v int64
		if err := rows.Scan(&id, &v); err != nil {
			return "error " + err.Error()
		}
		fmt.Fprintf(&b, "%d:%d ", id, v)
	}
	if err := rows.Err(); err != nil {
		return fmt.Sprintf("error %d", mysqlErrNumber(err))
	}
	return b.String()
}

// backendKV reads kv directly.
func (e *effectsEnv) backendKV() string {
	return readKV(queryIn{e.root, "`" + e.db + "`"})
}

// queryIn runs the kv read against a schema on a handle with no current
// database.
type queryIn struct {
	db     *sql.DB
	schema string
}

func (q queryIn) Query(s string, args ...any) (*sql.Rows, error) {
	return q.db.Query(strings.Replace(s, "FROM kv", "FROM "+q.schema+".kv", 1), args...)
}

// prepare puts kv back as the forms expect it (its two columns, rows 1-3,
// a few more at most; cached) and waits until its copy is ready at a
// version that holds, then reads it once (warm). It reports whether that
// read was answered from memory.
func (e *effectsEnv) prepare(t *testing.T, before string, first bool) bool {
	t.Helper()
	db := "`" + e.db + "`"
	var cols int
	if err := e.root.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'kv'", e.db).Scan(&cols); err != nil {
		t.Fatal(err)
	}
	st0, cached := cachedStatus(t, e.adminDB, "kv")
	cached = cached && st0.state != "dropped"
	if cached && st0.state == "ready" {
		e.checkMissed(t)
	}
	if !first {
		// A later request of a form: kv as the form's requests left it
		// (a DDL form's next request reads or undoes what the last did).
		if cols == 0 {
			return false // renamed or dropped by the form
		}
	} else {
		if cols != 2 {
			// A DDL form changed or dropped it: made anew.
			if cached {
				if _, err := e.adminDB.Exec("ALTER TABLE kv NOCACHE"); err != nil {
					t.Fatalf("ALTER TABLE kv NOCACHE: %v", err)
				}
				cached = false
			}
			e.rootExec(t, "DROP TABLE IF EXISTS "+db+".kv", "CREATE TABLE "+db+".kv (id INT PRIMARY KEY, v BIGINT NOT NULL)")
		}
		var base, all int
		if err := e.root.QueryRow("SELECT COALESCE(SUM(id IN (1, 2, 3)), 0), COUNT(*) FROM "+db+".kv").Scan(&base, &all); err != nil {
			t.Fatal(err)
		}
		if base < 3 || all > 40 {
			e.rootExec(t, "DELETE FROM "+db+".kv WHERE id > 3",
				"INSERT IGNORE INTO "+db+".kv VALUES (1, 0), (2, 0), (3, 0)")
		}
	}
	if !cached {
		e.missedSeen = 0 // (a table cached anew counts from 0)
		if _, err := e.adminDB.Exec("ALTER TABLE kv CACHE"); err != nil {
			t.Fatalf("ALTER TABLE kv CACHE: %v", err)
		}
	}
	var rows int64
	if err := e.root.QueryRow("SELECT COUNT(*) FROM " + db + ".kv").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if st, _ := cachedStatus(t, e.adminDB, "kv"); strings.Contains(st.staleReason, "not ended yet") {
		// An earlier request of the form opened a transaction that
		// wrote kv: kv stays off memory until it ends.
		return false
	}
	waitFor(t, 20*time.Second, "kv to settle before "+before, func() (bool, error) {
		st1, _ := cachedStatus(t, e.adminDB, "kv")
		time.Sleep(20 * time.Millisecond)
		st2, _ := cachedStatus(t, e.adminDB, "kv")
		return st1.invalidation == "binlog" && st1.state == "ready" && st2.state == "ready" && st1.rows == rows && st1.version == st2.version,
			fmt.Errorf("%s, %s (%s), %d rows of %d, v%d->v%d", st2.invalidation, st2.state, st2.staleReason, st2.rows, rows, st1.version, st2.version)
	})
	e.checkMissed(t) // (kv has settled: the log has caught up with the last request)
	h0 := hitsOf(t, e.adminDB, "kv")
	readKV(e.nextRead)
	return hitsOf(t, e.adminDB, "kv") > h0
}

// rootExec runs statements directly on the backend.
func (e *effectsEnv) rootExec(t *testing.T, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := e.root.Exec(q); err != nil {
			t.Fatalf("backend: %s: %v", q, err)
		}
	}
}

// reqOutcome is what one request did and what the checks found.
type reqOutcome struct {
	err      error
	stale    []string // the reads that missed the request's changes
	mismatch []string // the binary log's effects the account lacks
	wide     []string // the account's effects on kv for a form that does not write kv
	written  []string // the tables the log shows changed (placeholder names)
}

// requestRun runs one request on conn and checks it: (a) the next read of
// kv through the proxy, on another connection, and the first read of the
// never-ending reader after the acknowledgement, both see what the backend
// has right after it; (b) every table the binary log shows the request
// changed is one the account names (written, or a DDL target), or the
// account says it cannot tell; the log's grants and stored programs are
// in the account too; and when narrow, kv is not in the account at all.
//
// The binary log shows a transaction's rows when it commits: a request
// that commits what an earlier request of the session wrote is checked
// against the accounts of the session's requests so far (sa).
func (e *effectsEnv) requestRun(t *testing.T, conn *sql.Conn, st *plugins.Statement, sa *sessionAccount, text string, narrow bool, indirect []string) reqOutcome {
	t.Helper()
	var out reqOutcome
	e.lastRequest = text
	from := masterStatus(t, e.root)
	// The account: the session's first request's is plugins.AnalyzeFor
	// of its text; a later one's follows what the session prepared
	// before, as the proxy's does (the session's record, st).
	st.Reset(plugins.ComQuery, text)
	a, aerr := st.Analysis()
	if sa.requests == 0 {
		a, aerr = plugins.AnalyzeFor(text, st.DB, e.dialect)
	}
	sa.requests++
	out.err = runRequest(context.Background(), conn, text)
	ep := e.bg.begin()
	// The read through the proxy comes first, at once: the proxy may
	// still learn of a write it missed from the binary log a moment
	// later. Nothing writes kv between it and the backend's read.
	next := readKV(e.nextRead)
	want := e.backendKV()
	if next != want {
		out.stale = append(out.stale, fmt.Sprintf("the next read returned [%s], the backend has [%s]", next, want))
	}
	if got, ok := e.bg.first(ep); !ok {
		t.Fatal("the concurrent reader read nothing for 5 s")
	} else if got != want {
		out.stale = append(out.stale, fmt.Sprintf("the concurrent reader's next read returned [%s], the backend has [%s]", got, want))
	}
	// The session's record of its prepared statements follows what the
	// backend ran: a request the proxy refused never reached it.
	res := plugins.Outcome{Source: plugins.FromBackend}
	if n := mysqlErrNumber(out.err); n != 0 {
		var me *drv.MySQLError
		errors.As(out.err, &me)
		res.Err = &gomysql.MyError{Code: n, Message: me.Message}
		if n == 8242 || n == 1235 {
			res.Source = plugins.FromProxy
		}
	}
	st.Finish(&res)
	to := masterStatus(t, e.root)
	events := e.watch.between(t, from, to)
	if aerr != nil {
		out.mismatch = append(out.mismatch, fmt.Sprintf("the account failed: %v", aerr))
		return out
	}
	if sa.allowed == nil {
		sa.allowed = map[string]bool{}
	}
	for _, id := range append(slices.Clone(a.Written), a.Targets...) {
		sa.allowed[strings.ToLower(id.Schema+"."+id.Table)] = true
	}
	for _, p := range indirect {
		sa.allowed[strings.ToLower(e.qualify(p))] = true
	}
	sa.unknown = sa.unknown || a.Effect == plugins.EffectUnknown
	sa.accounts = sa.accounts || a.Accounts
	sa.programs = sa.programs || a.Programs
	sa.effect = sa.effect || a.Effect != plugins.EffectNone
	allowed, unknown := sa.allowed, sa.unknown
	seen := map[string]bool{}
	note := func(n tableName, why string) {
		ph := e.placeholder(n)
		if !seen[ph] {
			seen[ph] = true
			out.written = append(out.written, ph)
		}
		if !unknown && !allowed[strings.ToLower(n.String())] {
			out.mismatch = append(out.mismatch, fmt.Sprintf("the log shows %s changed (%s); the account has written %v, targets %v, effect %v",
				n, why, a.Written, a.Targets, a.Effect))
		}
	}
	for _, ev := range events {
		if ev.query == "" {
			note(tableName{ev.schema, ev.table}, "rows of "+strings.TrimSpace(ev.annotate))
			continue
		}
		q := readQuery(ev.schema, ev.query)
		switch {
		case q.frame, q.temp:
		case q.accounts:
			if !sa.accounts {
				out.mismatch = append(out.mismatch, fmt.Sprintf("the log shows %q, which changes accounts; the account's Accounts is false", ev.query))
			}
		case q.programs:
			if !sa.programs {
				out.mismatch = append(out.mismatch, fmt.Sprintf("the log shows %q, a stored program; the account's Programs is false", ev.query))
			}
		case q.unknown:
			if os.Getenv("TABLEPROXY_EFFECTS_DEBUG") != "" {
				t.Logf("a statement of the log this test does not read: %q", ev.query)
			}
			if !sa.effect {
				out.mismatch = append(out.mismatch, fmt.Sprintf("the log shows %q, and the account says the request changes nothing", ev.query))
			}
		default:
			for _, n := range q.tables {
				if strings.EqualFold(n.schema, e.db) || strings.EqualFold(n.schema, e.db2) {
					note(n, ev.query)
				}
			}
		}
	}
	if narrow {
		kv := strings.ToLower(e.db + ".kv")
		for _, id := range append(slices.Clone(a.Written), a.Targets...) {
			if strings.ToLower(id.Schema+"."+id.Table) == kv {
				out.wide = append(out.wide, "the account has kv written or altered")
				break
			}
		}
		if a.Effect == plugins.EffectUnknown {
			out.wide = append(out.wide, fmt.Sprintf("the account cannot tell what the request writes (%v)", a.Why))
		}
	}
	sort.Strings(out.written)
	return out
}

// sessionAccount is the union of the accounts of a session's requests.
type sessionAccount struct {
	requests                            int
	allowed                             map[string]bool // schema.table, lower case
	unknown, accounts, programs, effect bool
}

// qualify turns a directive's table name into schema.table.
func (e *effectsEnv) qualify(p string) string {
	if s, t, ok := strings.Cut(p, "."); ok && s == "db2" {
		return e.db2 + "." + t
	}
	return e.db + "." + p
}

// newSession is a new connection of the writer and the account's view of
// its session.
func (e *effectsEnv) newSession(t *testing.T) (*sql.Conn, *plugins.Statement) {
	t.Helper()
	conn, err := e.writerDB.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return conn, &plugins.Statement{Session: &plugins.SessionState{}, DB: e.db, Dialect: e.dialect}
}

// currentDB follows the session's database (USE in a request).
func currentDB(t *testing.T, conn *sql.Conn) string {
	var db sql.NullString
	if err := conn.QueryRowContext(context.Background(), "SELECT DATABASE()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	return db.String
}
