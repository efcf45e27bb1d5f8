package e2e

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/internal/testdb"
)

// textRows renders a result's rows, each row's values joined by "|"
// ("NULL" for NULL).
func textRows(rs resultSet) []string {
	var out []string
	for _, row := range rs.rows {
		vals := make([]string, len(row))
		for i, v := range row {
			switch x := v.(type) {
			case nil:
				vals[i] = "NULL"
			case []byte:
				vals[i] = string(x)
			default:
				vals[i] = fmt.Sprint(x)
			}
		}
		out = append(out, strings.Join(vals, "|"))
	}
	return out
}

// columnNames are a result's column names.
func columnNames(rs resultSet) string {
	var names []string
	for _, c := range rs.cols {
		names = append(names, strings.Fields(c)[0])
	}
	return strings.Join(names, " ")
}

// wantRows checks a query's rows (see textRows).
func wantRows(t *testing.T, db *sql.DB, want []string, query string, args ...any) {
	t.Helper()
	sets, err := tryQuery(db, query, args...)
	if err != nil || len(sets) != 1 {
		t.Errorf("%s: %d results, %v", query, len(sets), err)
		return
	}
	if got := textRows(sets[0]); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s:\n got  %q\n want %q", query, got, want)
	}
}

// wantQueryError checks that a query fails with a MySQL error of number
// code whose message contains text.
func wantQueryError(t *testing.T, db *sql.DB, code uint16, text, query string) {
	t.Helper()
	_, err := tryQuery(db, query)
	wantError(t, err, code, text)
}

// TestVirtualSchemaSelect: every read-only SELECT of the virtual schema
// is answered, in the text and the binary protocol: aggregates, GROUP BY,
// ORDER BY, LIMIT, LIKE, expressions, and a join of cached_tables with
// ddl_jobs on the table's name.
func TestVirtualSchemaSelect(t *testing.T) {
	e := newDDLEnv(t)
	e.restartWith(t, "  - name: cache\n"+e.ddlOptions(""))
	e.seed(t, 100)
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.u (id INT PRIMARY KEY, v INT NOT NULL)",
		"INSERT INTO `"+e.db+"`.u VALUES (1, 10), (2, 20)")
	app, admin := e.open(t, e.app), e.open(t, e.admin)
	for _, q := range []string{"ALTER TABLE t ADD INDEX idx_c (c)", "ALTER TABLE u ADD INDEX idx_v (v)"} {
		if _, err := app.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for table, rows := range map[string]int64{"t": 100, "u": 2} {
		if _, err := admin.Exec("ALTER TABLE " + table + " CACHE"); err != nil {
			t.Fatal(err)
		}
		waitState(t, admin, table, "ready", rows, 0)
	}
	for i := 0; i < 3; i++ {
		var n int
		if err := app.QueryRow("SELECT v FROM u WHERE id = 1").Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	var hits int64
	if err := app.QueryRow("SELECT hits FROM tableproxy.cached_tables WHERE table_name = 'u'").Scan(&hits); err != nil || hits < 1 {
		t.Fatalf("hits of u: %d, %v", hits, err)
	}

	wantRows(t, app, []string{"2"}, "SELECT COUNT(*) FROM tableproxy.ddl_jobs")
	wantRows(t, app, []string{"2|" + fmt.Sprint(hits)}, "SELECT COUNT(*), SUM(hits) FROM tableproxy.cached_tables WHERE schema_name = '"+e.db+"'")
	wantRows(t, app, []string{"done|2"}, "SELECT state, COUNT(*) AS n FROM tableproxy.ddl_jobs GROUP BY state ORDER BY state")
	// Without an ORDER BY, groups and distinct rows come sorted by their
	// columns, as MariaDB sorts them.
	wantRows(t, app, []string{"done|2"}, "SELECT state, COUNT(*) FROM tableproxy.ddl_jobs GROUP BY state")
	wantRows(t, app, []string{"t|done", "u|done"}, "SELECT DISTINCT table_name, state FROM tableproxy.ddl_jobs")
	wantRows(t, app, []string{"u"}, "SELECT table_name FROM tableproxy.ddl_jobs WHERE query LIKE '%idx_v%'")
	wantRows(t, app, []string{"t"}, "SELECT table_name FROM tableproxy.cached_tables ORDER BY table_name LIMIT 1")
	wantRows(t, app, []string{"u"}, "SELECT table_name FROM tableproxy.cached_tables ORDER BY table_name DESC LIMIT 1 OFFSET 0")
	wantRows(t, app, []string{"t|101", "u|3"}, "SELECT table_name, row_count + 1 FROM tableproxy.cached_tables ORDER BY table_name")
	wantRows(t, app, []string{"t|done|add index", "u|done|add index"},
		"SELECT c.table_name, j.state, j.job_type FROM tableproxy.cached_tables c JOIN tableproxy.ddl_jobs j ON c.table_name = j.table_name ORDER BY c.table_name")
	// Virtual tables have no backend order to match: a join without ORDER
	// BY answers too.
	wantRows(t, app, []string{"u|done"},
		"SELECT c.table_name, j.state FROM tableproxy.cached_tables c JOIN tableproxy.ddl_jobs j ON c.table_name = j.table_name WHERE c.table_name = 'u' LIMIT 5")

	// The binary protocol: go-sql-driver prepares statements with
	// parameters when interpolateParams is off (its default).
	wantRows(t, app, []string{"u|" + fmt.Sprint(hits)}, "SELECT table_name, hits FROM tableproxy.cached_tables WHERE table_name = ?", "u")
	wantRows(t, app, []string{"1"}, "SELECT COUNT(*) FROM tableproxy.ddl_jobs WHERE table_name = ? AND state = ?", "t", "done")
	stmt, err := app.Prepare("SELECT state, COUNT(*) FROM tableproxy.ddl_jobs GROUP BY state ORDER BY state")
	if err != nil {
		t.Fatal(err)
	}
	defer stmt.Close()
	var state string
	var n int64
	if err := stmt.QueryRow().Scan(&state, &n); err != nil || state != "done" || n != 2 {
		t.Errorf("prepared GROUP BY: %s %d %v", state, n, err)
	}

	wantQueryError(t, app, 1146, "Table 'tableproxy.nosuch' doesn't exist", "SELECT * FROM tableproxy.nosuch")
	wantQueryError(t, app, 1054, "Unknown column 'nosuch' in 'field list'", "SELECT nosuch FROM tableproxy.ddl_jobs")
	wantQueryError(t, app, 1054, "Unknown column 'nosuch' in 'where clause'", "SELECT state FROM tableproxy.ddl_jobs WHERE nosuch = 1")
	wantQueryError(t, app, 1235, "HAVING", "SELECT state, COUNT(*) FROM tableproxy.ddl_jobs GROUP BY state HAVING COUNT(*) > 1 ORDER BY state")
	wantRows(t, app, []string{"done"}, "SELECT DISTINCT state FROM tableproxy.ddl_jobs WHERE job_id IS NOT NULL ORDER BY state")
	wantQueryError(t, app, 1235, "UPPER", "SELECT UPPER(state) FROM tableproxy.ddl_jobs")
	wantQueryError(t, app, 1235, "UNION", "SELECT job_id FROM tableproxy.ddl_jobs UNION SELECT 1")
	wantQueryError(t, app, 1235, "subquer", "SELECT * FROM (SELECT job_id FROM tableproxy.ddl_jobs) AS j")
	wantQueryError(t, app, 1235, "both tableproxy tables and the backend's", "SELECT * FROM tableproxy.ddl_jobs j JOIN t ON t.id = j.job_id")
}

// TestVirtualSchemaWithoutCache: the schema is there whatever plugins
// are on: tableproxy.ddl_jobs with only ddloffload, and with none only
// the cluster's cluster_members (but a schema that answers).
func TestVirtualSchemaWithoutCache(t *testing.T) {
	e := newDDLEnv(t)
	e.seed(t, 10)
	app := e.open(t, e.app)
	if _, err := app.Exec("ALTER TABLE t ADD INDEX idx_c (c)"); err != nil {
		t.Fatal(err)
	}
	wantRows(t, app, []string{"t|done"}, "SELECT table_name, state FROM tableproxy.ddl_jobs")
	wantRows(t, app, []string{"1"}, "SELECT COUNT(*) FROM tableproxy.ddl_jobs")
	wantQueryError(t, app, 1146, "Table 'tableproxy.cached_tables' doesn't exist", "SELECT * FROM tableproxy.cached_tables")

	none := startProxyOpts(t, e.backend.Addr, []account{e.app}, proxyOpts{yaml: "plugins: []\n"})
	db := testdb.Open(t, testdb.DSN(none.addr, e.app.name, e.app.password, e.db, nil))
	wantQueryError(t, db, 1146, "Table 'tableproxy.ddl_jobs' doesn't exist", "SELECT * FROM tableproxy.ddl_jobs")
	sets, err := tryQuery(db, "SHOW FULL TABLES FROM tableproxy")
	if err != nil || len(sets) != 1 || columnNames(sets[0]) != "Tables_in_tableproxy Table_type" || len(sets[0].rows) != 1 {
		t.Errorf("SHOW FULL TABLES FROM tableproxy with plugins: []: %v %v", sets, err)
	}
}

// TestVirtualSchemaShow: SHOW TABLES, SHOW FULL TABLES, SHOW [FULL]
// COLUMNS and DESCRIBE of the virtual schema print what the backend prints
// for an equivalent table, and USE tableproxy makes its tables the
// session's unqualified names.
func TestVirtualSchemaShow(t *testing.T) {
	e := newDDLEnv(t)
	e.restartWith(t, "  - name: cache\n"+e.ddlOptions(""))
	app := e.open(t, e.app)
	wantRows(t, app, []string{"cached_tables", "cluster_members", "ddl_jobs", "last_statement"}, "SHOW TABLES FROM tableproxy")
	wantRows(t, app, []string{"cached_tables|SYSTEM VIEW", "ddl_jobs|SYSTEM VIEW"}, "SHOW FULL TABLES FROM tableproxy LIKE '%d%'")
	wantRows(t, app, []string{"ddl_jobs"}, "SHOW TABLES FROM tableproxy WHERE Tables_in_tableproxy = 'ddl_jobs'")

	// The columns of SHOW COLUMNS, and a BIGINT and a VARCHAR column, as
	// the backend prints them for a table of such columns.
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.twin (state VARCHAR(1024) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL, hits BIGINT NULL)")
	direct := testdb.Open(t, testdb.DSN(e.backend.Addr, e.app.name, e.app.password, e.db, nil))
	for _, full := range []string{"", "FULL "} {
		want, err := tryQuery(direct, "SHOW "+full+"COLUMNS FROM twin")
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{
			"SHOW " + full + "COLUMNS FROM tableproxy.cached_tables WHERE Field IN ('hits', 'state')",
			"SHOW " + full + "COLUMNS FROM cached_tables FROM tableproxy WHERE Field IN ('hits', 'state')",
		} {
			got, err := tryQuery(app, q)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			if g, w := columnNames(got[0]), columnNames(want[0]); g != w {
				t.Errorf("%s: columns\n got  %s\n want %s", q, g, w)
			}
			// (Privileges: the virtual tables are read-only.)
			wantText := strings.ReplaceAll(fmt.Sprint(textRows(want[0])), "select,insert,update,references", "select")
			if g := fmt.Sprint(textRows(got[0])); g != wantText {
				t.Errorf("%s:\n got  %s\n want %s", q, g, wantText)
			}
		}
	}
	wantRows(t, app, []string{"state|varchar(1024)|YES||NULL|"}, "DESCRIBE tableproxy.ddl_jobs state")
	wantRows(t, app, []string{"job_id|bigint(20)|YES||NULL|"}, "SHOW COLUMNS FROM tableproxy.ddl_jobs LIKE 'job_id'")
	wantQueryError(t, app, 1146, "Table 'tableproxy.nosuch' doesn't exist", "SHOW COLUMNS FROM tableproxy.nosuch")
	wantQueryError(t, app, 1235, "this SHOW statement", "SHOW CREATE TABLE tableproxy.ddl_jobs")

	// USE tableproxy, on one connection.
	conn, err := app.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{"USE tableproxy", "SELECT COUNT(*) FROM cached_tables", "SHOW TABLES"} {
		if _, err := tryQuery(conn, q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
	if _, err := conn.ExecContext(t.Context(), "INSERT INTO twin VALUES ('x', 1)"); mysqlErrNumber(err) != 1235 {
		t.Errorf("an unqualified write in tableproxy: %v, want 1235", err)
	}
	if _, err := conn.ExecContext(t.Context(), "INSERT INTO `"+e.db+"`.twin VALUES ('x', 1)"); err != nil {
		t.Errorf("a qualified write in tableproxy: %v", err)
	}
	if _, err := tryQuery(conn, "USE `"+e.db+"`"); err != nil {
		t.Fatal(err)
	}
	wantRows(t, direct, []string{"1"}, "SELECT COUNT(*) FROM twin")
	if sets, err := tryQuery(conn, "SELECT COUNT(*) FROM twin"); err != nil || fmt.Sprint(textRows(sets[0])) != "[1]" {
		t.Errorf("after USE of the database again: %v %v", sets, err)
	}

	// COM_INIT_DB, which the mysql client's own `use` command sends, as
	// the USE statement it is.
	c, err := client.ConnectWithTimeout(e.proxy.addr, e.app.name, e.app.password, e.db, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.UseDB("tableproxy"); err != nil {
		t.Fatalf("COM_INIT_DB tableproxy: %v", err)
	}
	if r, err := c.Execute("SELECT table_name FROM cached_tables WHERE table_name = 'nosuch'"); err != nil || r.RowNumber() != 0 {
		t.Errorf("after COM_INIT_DB tableproxy: %v", err)
	}
	if err := c.UseDB(e.db); err != nil {
		t.Fatalf("COM_INIT_DB back: %v", err)
	}
	if r, err := c.Execute("SELECT COUNT(*) FROM twin"); err != nil || r.RowNumber() != 1 {
		t.Errorf("after COM_INIT_DB of the database again: %v", err)
	}
	err = c.UseDB("e2e_no_such_database")
	if me := (*mysql.MyError)(nil); !errors.As(err, &me) || me.Code != 1044 {
		t.Errorf("COM_INIT_DB of a database the user may not see: %v, want the backend's 1044", err)
	}
	if r, err := c.Execute("SELECT COUNT(*) FROM twin"); err != nil || r.RowNumber() != 1 {
		t.Errorf("after a refused COM_INIT_DB, the database stays: %v", err)
	}

	// Prepared.
	sets, err := tryPrepared(conn, "SHOW COLUMNS FROM tableproxy.ddl_jobs WHERE Field LIKE ?", "job%")
	if err != nil || len(sets) != 1 || fmt.Sprint(textRows(sets[0])) != "[job_id|bigint(20)|YES||NULL| job_type|varchar(1024)|YES||NULL|]" {
		t.Errorf("prepared SHOW COLUMNS: %v %v", sets, err)
	}

	// The prepare's answer describes the statement as written: its
	// parameters and its result columns (Connector/J's getMetaData reads
	// them before any execution); what the evaluator does not cover is
	// refused at the prepare already.
	for _, p := range []struct {
		sql             string
		params, columns int
	}{
		{"SELECT table_name, hits, row_count FROM tableproxy.cached_tables WHERE table_name = ?", 1, 3},
		{"SELECT state, COUNT(*), SUM(job_id) FROM tableproxy.ddl_jobs WHERE table_name = ? AND state <> ? GROUP BY state ORDER BY state", 2, 3},
		{"SELECT * FROM tableproxy.ddl_jobs", 0, len(jobColumns(t, c))},
		{"SHOW FULL COLUMNS FROM tableproxy.cached_tables WHERE Field = ?", 1, 9},
	} {
		stmt, err := c.Prepare(p.sql)
		if err != nil {
			t.Errorf("prepare %q: %v", p.sql, err)
			continue
		}
		if stmt.ParamNum() != p.params || stmt.ColumnNum() != p.columns {
			t.Errorf("prepare %q: %d parameters, %d columns; want %d, %d", p.sql, stmt.ParamNum(), stmt.ColumnNum(), p.params, p.columns)
		}
		stmt.Close()
	}
	_, err = c.Prepare("SELECT UPPER(state) FROM tableproxy.ddl_jobs WHERE job_id = ?")
	if me := (*mysql.MyError)(nil); !errors.As(err, &me) || me.Code != 1235 || !strings.Contains(me.Message, "UPPER") {
		t.Errorf("prepare of what the evaluator does not cover: %v, want 1235 naming UPPER", err)
	}
}

// jobColumns are the columns of tableproxy.ddl_jobs, as SHOW COLUMNS
// lists them.
func jobColumns(t *testing.T, c *client.Conn) []string {
	t.Helper()
	r, err := c.Execute("SHOW COLUMNS FROM tableproxy.ddl_jobs")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := 0; i < r.RowNumber(); i++ {
		name, _ := r.GetString(i, 0)
		names = append(names, name)
	}
	return names
}
