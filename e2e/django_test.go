package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tableproxy/internal/testdb"
)

// A Django application (Debian's python3-django with MySQLdb) through a
// proxy with its defaults, its table ref cached by the admin:
//
//   - every Model.objects.create() of another table, an INSERT ... RETURNING
//     on MariaDB, leaves ref in memory: the reads of ref that follow are
//     answered from it;
//   - a migration that alters ref (AddField with a default, AlterField,
//     AddIndex, RenameField) runs through the proxy, and ref then reads
//     through the proxy as on the backend, and is cached again.

// djangoRefs are the rows of ref the test inserts: id, code, name, rate.
var djangoRefs = [][4]string{{"1", "EUR", "Euro", "1.0000"}, {"2", "USD", "US dollar", "1.0800"},
	{"3", "GBP", "Pound sterling", "0.8600"}, {"4", "JPY", "Yen", "161.2000"}, {"5", "CHF", "Swiss franc", "0.9400"}}

func TestDjango(t *testing.T) {
	python := requireDjango(t)
	dir, err := filepath.Abs(filepath.Join("testdata", "django"))
	if err != nil {
		t.Fatal(err)
	}
	b := testdb.Get(t)
	db := b.NewDatabase(t)
	app := account{b.NewUser(t, "app-pw", "ALL", db), "app-pw"}
	// The admin caches ref and reads the binary log for the online jobs.
	admin := account{b.NewUser(t, "admin-pw", "ALL", db), "admin-pw"}
	for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
		b.Exec(t, fmt.Sprintf("GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '%s'@'%s'", admin.name, host))
	}
	p := startProxyOpts(t, b.Addr, []account{app}, proxyOpts{defaults: true, admins: []account{admin}})
	env := dbEnv(p.addr, app, db)
	appDB := testdb.Open(t, testdb.DSN(p.addr, app.name, app.password, db, nil))
	adminDB := testdb.Open(t, testdb.DSN(p.addr, admin.name, admin.password, db, nil))
	direct := testdb.Open(t, testdb.DSN(b.Addr, b.RootUser, b.RootPassword, db, nil))

	// (a) The first migration, rows in ref, ref cached.
	if out, err := manage(python, dir, env, "migrate", "refs", "0001"); err != nil {
		t.Fatalf("migrate refs 0001 through the proxy: %v\n%s", err, out)
	}
	for _, r := range djangoRefs {
		if _, err := appDB.Exec("INSERT INTO ref (id, code, name, rate) VALUES (?, ?, ?, ?)", r[0], r[1], r[2], r[3]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := adminDB.Exec("ALTER TABLE ref CACHE"); err != nil {
		t.Fatal(err)
	}
	waitState(t, adminDB, "ref", "ready", int64(len(djangoRefs)), 1)

	// (b) Model.objects.create() of an event, then Ref.objects.get().
	const n, ref = 40, 3
	hits0 := hitsOf(t, adminDB, "ref")
	out, err := manage(python, dir, env, "churn", "--explain", "--n", fmt.Sprint(n), "--ref", fmt.Sprint(ref), "--gap", "0.05")
	if err != nil {
		t.Fatalf("churn through the proxy: %v\n%s", err, out)
	}
	hits := hitsOf(t, adminDB, "ref") - hits0
	var churn struct {
		FirstCreate []string    `json:"first_create"`
		EventIDs    []int64     `json:"event_ids"`
		Reads       [][3]any    `json:"reads"`
		Served      [][2]string `json:"served"`
	}
	if err := json.Unmarshal([]byte(lastLine(out)), &churn); err != nil {
		t.Fatalf("churn's summary: %v\n%s", err, out)
	}
	// What Django sends for create() on MariaDB 10.5+, one statement.
	if len(churn.FirstCreate) != 1 || !strings.Contains(churn.FirstCreate[0], " RETURNING ") {
		t.Errorf("create() sent %q, want one INSERT ... RETURNING", churn.FirstCreate)
	}
	want := fmt.Sprint([3]any{float64(ref), djangoRefs[ref-1][1], djangoRefs[ref-1][3]})
	for i, r := range churn.Reads {
		if got := fmt.Sprint(r); got != want {
			t.Errorf("read %d of ref %d: %s, want %s", i, ref, got, want)
		}
	}
	if len(churn.Reads) != n || len(churn.EventIDs) != n {
		t.Errorf("%d reads and %d events, want %d of each", len(churn.Reads), len(churn.EventIDs), n)
	}
	var events int
	if err := direct.QueryRow("SELECT COUNT(*) FROM event").Scan(&events); err != nil || events != n {
		t.Errorf("events on the backend: %d (%v), want %d", events, err, n)
	}
	t.Logf("%d of %d reads of ref after create() of an event answered from memory (%.1f%%)", hits, n, 100*float64(hits)/n)
	for i, s := range churn.Served {
		if s[0] != "proxy" {
			t.Logf("read %d answered by the %s: %s", i, s[0], s[1])
		}
	}
	if hits < n*95/100 {
		t.Errorf("%d of %d reads of ref after Event.objects.create() answered from memory, want at least 95%%", hits, n)
	}

	// (c) The migration that alters the cached table.
	if out, err := manage(python, dir, append(env, "LOG_SQL=1"), "migrate", "refs", "0002"); err != nil {
		stmt, msg := failedStatement(out)
		t.Fatalf("migrate refs 0002 (alters the cached ref) through the proxy: %v\n last statement: %s\n error: %s", err, stmt, msg)
	}
	var applied int
	if err := direct.QueryRow("SELECT COUNT(*) FROM django_migrations WHERE app = 'refs' AND name = '0002_alter_ref'").Scan(&applied); err != nil || applied != 1 {
		t.Errorf("django_migrations records 0002_alter_ref %d times (%v), want once", applied, err)
	}
	ddl := checkAlteredCachedTable(t, appDB, adminDB, direct, "ref", int64(len(djangoRefs)))
	for _, s := range []string{"`weight` int(11) NOT NULL", "`title` varchar(120) NOT NULL", "KEY `ref_rate_idx` (`rate`)"} {
		if !strings.Contains(ddl, s) {
			t.Errorf("ref after 0002 has no %s:\n%s", s, ddl)
		}
	}
	// The application's model (the shape after 0002) reads the same rows
	// through the proxy as directly.
	viaProxy, err := manage(python, dir, env, "dumprefs")
	if err != nil {
		t.Fatalf("dumprefs through the proxy: %v\n%s", err, viaProxy)
	}
	onBackend, err := manage(python, dir, dbEnv(b.Addr, account{b.RootUser, b.RootPassword}, db), "dumprefs")
	if err != nil {
		t.Fatalf("dumprefs on the backend: %v\n%s", err, onBackend)
	}
	if viaProxy != onBackend || !strings.Contains(onBackend, `"weight": 10`) {
		t.Errorf("Ref rows through the proxy:\n%s\non the backend:\n%s", viaProxy, onBackend)
	}
}

// checkAlteredCachedTable checks a cached table after a migration altered it
// through the proxy: its schema and rows read through the proxy (as app) are
// the backend's, it is cached again, and a read of it is then answered from
// memory and still the backend's. It returns the table's definition.
func checkAlteredCachedTable(t *testing.T, app, admin, direct *sql.DB, table string, rows int64) string {
	t.Helper()
	ddl := showCreate(t, direct, table)
	if got := showCreate(t, app, table); got != ddl {
		t.Errorf("SHOW CREATE TABLE %s through the proxy:\n%s\ndirectly:\n%s", table, got, ddl)
	}
	compare := func(when string) {
		t.Helper()
		q := "SELECT * FROM `" + table + "` ORDER BY 1"
		got, want := dumpQuery(t, app, q), dumpQuery(t, direct, q)
		if got != want {
			t.Errorf("%s, %s through the proxy:\n%s\ndirectly:\n%s", when, q, got, want)
		}
	}
	compare("right after the migration")
	waitState(t, admin, table, "ready", rows, 1)
	compare("cached again")
	// The first read of a shape goes to the backend (the proxy learns its
	// column metadata); the second is answered from memory.
	q := "SELECT * FROM `" + table + "` WHERE id = 1"
	for i := 0; i < 2; i++ {
		hits0 := hitsOf(t, admin, table)
		if got, want := dumpQuery(t, app, q), dumpQuery(t, direct, q); got != want {
			t.Errorf("cached again, %s through the proxy:\n%s\ndirectly:\n%s", q, got, want)
		}
		if i == 1 && hitsOf(t, admin, table) == hits0 {
			t.Errorf("cached again, %s (the second time) was not answered from memory", q)
		}
	}
	return ddl
}

// requireDjango finds a python3 that has Django and MySQLdb (Debian's
// python3-django and python3-mysqldb are in /usr/bin/python3's path, which
// another python3 earlier on PATH may not share), or skips the test, or
// fails it under TABLEPROXY_TEST_REQUIRE=1.
func requireDjango(t *testing.T) string {
	t.Helper()
	candidates := []string{"/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	var why []string
	for _, p := range candidates {
		out, err := exec.Command(p, "-c", "import django, MySQLdb").CombinedOutput()
		if err == nil {
			return p
		}
		why = append(why, fmt.Sprintf("%s: %v: %s", p, err, lastLine(string(out))))
	}
	msg := "Django with MySQLdb is not installed (install the Debian packages python3-django python3-mysqldb): " + strings.Join(why, "; ")
	if os.Getenv("TABLEPROXY_TEST_REQUIRE") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// manage runs manage.py of the Django project in dir, with the database
// from env; it returns stdout, or on failure stdout and stderr together.
func manage(python, dir string, env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, append([]string{"manage.py"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}

// failedStatement picks, from the output of a manage.py migrate run with
// LOG_SQL=1 that failed, the migration's last statement (the one that
// failed) and the exception's line.
func failedStatement(out string) (stmt, msg string) {
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.Contains(line, "; (params "):
			// The schema editor logs each statement before it sends it
			// ("  Applying refs.0002_alter_ref...ALTER TABLE ...; (params
			// [10])"); the line logged after it names no failed one.
			if i := strings.LastIndex(line, "..."); i >= 0 {
				line = line[i+3:]
			}
			stmt = strings.TrimSpace(line)
		case strings.Contains(line, "Error: "):
			msg = line
		}
	}
	if msg == "" {
		msg = out
	}
	return stmt, msg
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
