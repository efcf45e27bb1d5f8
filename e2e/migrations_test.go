package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"tableproxy/internal/testdb"
)

// A migration framework's own run of the same migrations (tables with
// foreign keys between them, several ADD INDEX steps on one table, a UNIQUE
// index, a column rename, a dropped index, rows, one step rolled back) ends
// in the same schema and rows through a proxy with its defaults as directly,
// and every index the migrations add through the proxy is built by an
// online job. Between two steps the admin caches a table (events) through
// the proxy; the next step alters it (a column added with a default, one
// changed, one renamed) and must run as directly, leave the table's schema
// and rows through the proxy as on the backend, and the table cached again.

// migrationFramework is one tool the test drives.
type migrationFramework struct {
	dir string // under testdata/migrations
	// prepare skips the test when the tool is missing and readies its
	// project; it returns the command that runs the migrations.
	prepare func(t *testing.T, dir string) []string
	// volatile are bookkeeping columns that hold the time of the run.
	volatile []string
	// jobs are the indexes added as "table.index" (each one online job).
	jobs []string
	// cacheAfter is the migration after which the test caches the table
	// cached (with cachedRows rows) through the proxy, as the admin;
	// the migrations after it, the first of which alters that table, run
	// with it cached. Given as the driver's MIGRATE_UNTIL takes it.
	cacheAfter string
	cached     string
	cachedRows int64
	// altered counts, on the backend, the records of the migration that
	// alters the cached table (one when it was applied).
	altered string
}

// migrationJobs are the ADD INDEX steps both projects take (Knex sends ALTER
// TABLE ... ADD INDEX, ActiveRecord CREATE INDEX); the DROP INDEX steps and
// the rollback's are no jobs.
var migrationJobs = []string{"posts.posts_title_idx", "events.events_kind_idx", "posts.posts_score_idx", "events.events_level_idx",
	"posts.posts_slug_unique", "users.users_name_idx"}

func TestMigrationsKnex(t *testing.T) {
	testMigrations(t, migrationFramework{
		dir:        "knex",
		prepare:    prepareKnex,
		volatile:   []string{"migration_time"},
		jobs:       migrationJobs,
		cacheAfter: "007_seed_rows.js",
		cached:     "events",
		cachedRows: 2,
		altered:    "SELECT COUNT(*) FROM knex_migrations WHERE name = '008_alter_events.js'",
	})
}

func TestMigrationsActiveRecord(t *testing.T) {
	testMigrations(t, migrationFramework{
		dir:        "activerecord",
		prepare:    prepareActiveRecord,
		volatile:   []string{"created_at", "updated_at"},
		jobs:       migrationJobs,
		cacheAfter: "20240101000007",
		cached:     "events",
		cachedRows: 2,
		altered:    "SELECT COUNT(*) FROM schema_migrations WHERE version = '20240101000008'",
	})
}

func prepareKnex(t *testing.T, dir string) []string {
	return []string{nodeProject(t, dir), "migrate.js"}
}

// nodeProject installs a Node project's locked packages when they are not
// yet, and returns the node program.
func nodeProject(t *testing.T, dir string) string {
	node := requireTool(t, "node", "nodejs")
	npm := requireTool(t, "npm", "npm")
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		runIn(t, dir, nil, npm, "ci", "--no-audit", "--no-fund")
	}
	return node
}

// prepareActiveRecord needs Debian's ruby-activerecord and ruby-mysql2.
func prepareActiveRecord(t *testing.T, dir string) []string {
	ruby := requireTool(t, "ruby", "ruby")
	if out, err := exec.Command(ruby, "-e", `require "active_record"; require "mysql2"`).CombinedOutput(); err != nil {
		msg := fmt.Sprintf("ActiveRecord with mysql2 is not installed (install the Debian packages ruby-activerecord ruby-mysql2): %s", out)
		if os.Getenv("TABLEPROXY_TEST_REQUIRE") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return []string{ruby, "migrate.rb"}
}

// runIn runs a command in dir with more environment, failing the test with
// its output if it fails.
func runIn(t *testing.T, dir string, env []string, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s in %s: %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
}

// dbEnv is how a migration project reaches its database.
func dbEnv(addr string, a account, db string) []string {
	host, port, _ := strings.Cut(addr, ":")
	return []string{"DB_HOST=" + host, "DB_PORT=" + port, "DB_USER=" + a.name, "DB_PASSWORD=" + a.password, "DB_NAME=" + db}
}

func testMigrations(t *testing.T, fw migrationFramework) {
	dir, err := filepath.Abs(filepath.Join("testdata", "migrations", fw.dir))
	if err != nil {
		t.Fatal(err)
	}
	command := fw.prepare(t, dir)
	b := testdb.Get(t)
	proxied, direct := b.NewDatabase(t), b.NewDatabase(t)
	app := account{b.NewUser(t, "app-pw", "ALL", proxied), "app-pw"}
	// The admin reads the binary log for the online jobs.
	admin := account{b.NewUser(t, "admin-pw", "ALL", proxied), "admin-pw"}
	for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
		b.Exec(t, fmt.Sprintf("GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '%s'@'%s'", admin.name, host))
	}
	p := startProxyOpts(t, b.Addr, []account{app}, proxyOpts{defaults: true, admins: []account{admin}})
	adminDB := testdb.Open(t, testdb.DSN(p.addr, admin.name, admin.password, proxied, nil))

	env := dbEnv(p.addr, app, proxied)
	if fw.cached != "" {
		runIn(t, dir, append(env, "MIGRATE_UNTIL="+fw.cacheAfter), command[0], command[1:]...)
		if _, err := adminDB.Exec("ALTER TABLE `" + fw.cached + "` CACHE"); err != nil {
			t.Fatal(err)
		}
		waitState(t, adminDB, fw.cached, "ready", fw.cachedRows, 1)
	}
	runIn(t, dir, env, command[0], command[1:]...)
	runIn(t, dir, dbEnv(b.Addr, account{b.RootUser, b.RootPassword}, direct), command[0], command[1:]...)

	root := b.Root(t)
	want, got := dumpSchema(t, root, direct, fw.volatile), dumpSchema(t, root, proxied, fw.volatile)
	for _, table := range unionKeys(want, got) {
		if want[table] != got[table] {
			t.Errorf("table %s\n through the proxy:\n%s\n directly:\n%s", table, got[table], want[table])
		}
	}
	checkIndexJobs(t, adminDB, proxied, fw.jobs)
	if fw.cached != "" {
		onBackend := testdb.Open(t, testdb.DSN(b.Addr, b.RootUser, b.RootPassword, proxied, nil))
		var n int
		if err := onBackend.QueryRow(fw.altered).Scan(&n); err != nil || n != 1 {
			t.Errorf("%s: %d (%v), want 1", fw.altered, n, err)
		}
		appDB := testdb.Open(t, testdb.DSN(p.addr, app.name, app.password, proxied, nil))
		checkAlteredCachedTable(t, appDB, adminDB, onBackend, fw.cached, fw.cachedRows)
	}
	if t.Failed() {
		t.Logf("proxy log:\n%s", p.stderr.String())
	}
}

// retainedOldTable reports whether a table is an online job's original,
// which the proxy keeps for a while after the swap so an index can be backed
// out; it is no part of the application's schema.
func retainedOldTable(name string) bool {
	return strings.Contains(name, "__old")
}

// dumpSchema describes every table of db (SHOW CREATE TABLE, then its rows
// without the volatile columns), read on the backend.
func dumpSchema(t *testing.T, root *sql.DB, db string, volatile []string) map[string]string {
	t.Helper()
	tables := queryStrings(t, root, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME", db)
	out := map[string]string{}
	for _, table := range tables {
		if retainedOldTable(table) {
			t.Logf("%s.%s: kept by an online job, not compared", db, table)
			continue
		}
		var name, ddl string
		if err := root.QueryRow(fmt.Sprintf("SHOW CREATE TABLE `%s`.`%s`", db, table)).Scan(&name, &ddl); err != nil {
			t.Fatalf("SHOW CREATE TABLE %s.%s: %v", db, table, err)
		}
		out[table] = ddl + "\n" + tableRows(t, root, db, table, volatile)
	}
	return out
}

// tableRows renders a table's rows, in primary key order, one a line.
func tableRows(t *testing.T, root *sql.DB, db, table string, volatile []string) string {
	t.Helper()
	var cols []string
	for _, c := range queryStrings(t, root, "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION", db, table) {
		if !contains(volatile, c) {
			cols = append(cols, "`"+c+"`")
		}
	}
	list := strings.Join(cols, ", ")
	rows, err := root.Query(fmt.Sprintf("SELECT %s FROM `%s`.`%s` ORDER BY %s", list, db, table, list))
	if err != nil {
		t.Fatalf("rows of %s.%s: %v", db, table, err)
	}
	defer rows.Close()
	var b strings.Builder
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if i > 0 {
				b.WriteString(" | ")
			}
			if v.Valid {
				b.WriteString(v.String)
			} else {
				b.WriteString("NULL")
			}
		}
		b.WriteString("\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// checkIndexJobs checks, through the proxy, that tableproxy.ddl_jobs holds
// one finished job for each "table.index" in want, and no other job on db.
func checkIndexJobs(t *testing.T, admin *sql.DB, db string, want []string) {
	t.Helper()
	rows, err := admin.Query("SELECT table_name, state, query, error FROM tableproxy.ddl_jobs WHERE db_name = '" + db + "'")
	if err != nil {
		t.Fatalf("tableproxy.ddl_jobs: %v", err)
	}
	defer rows.Close()
	found := map[string]int{}
	for rows.Next() {
		var table, state, query string
		var jobErr sql.NullString
		if err := rows.Scan(&table, &state, &query, &jobErr); err != nil {
			t.Fatal(err)
		}
		index := jobIndex(table, query, want)
		if state != "done" || index == "" {
			t.Errorf("job on %s: state %s, query %q, error %q", table, state, query, jobErr.String)
			continue
		}
		found[index]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, ix := range want {
		if found[ix] != 1 {
			t.Errorf("index %s: %d finished online jobs, want 1", ix, found[ix])
		}
	}
}

// jobIndex is the "table.index" of want that a job's statement adds.
func jobIndex(table, query string, want []string) string {
	for _, ix := range want {
		tbl, name, _ := strings.Cut(ix, ".")
		if tbl == table && strings.Contains(query, name) {
			return ix
		}
	}
	return ""
}

func queryStrings(t *testing.T, db *sql.DB, query string, args ...any) []string {
	t.Helper()
	rows, err := db.Query(query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func unionKeys(a, b map[string]string) []string {
	seen := map[string]bool{}
	for k := range a {
		seen[k] = true
	}
	for k := range b {
		seen[k] = true
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
