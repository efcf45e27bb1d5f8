package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
)

// TestCachedMetadataFollowsTheTable: an answer from memory carries the
// column definitions the backend gives for that table, in that database,
// as it is defined now. The same statement text in two databases, and the
// same table after its definition changed (between NOCACHE and CACHE, or
// behind the proxy's back), each get their own.
func TestCachedMetadataFollowsTheTable(t *testing.T) {
	e := newCacheEnv(t)
	other := e.backend.NewDatabase(t)
	for _, a := range []account{e.app, e.admin} {
		for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
			e.backend.Exec(t, fmt.Sprintf("GRANT ALL ON `%s`.* TO '%s'@'%s'", other, a.name, host))
		}
	}
	e.backend.Exec(t,
		"CREATE TABLE `"+e.db+"`.t (id INT PRIMARY KEY, v INT NULL)",
		"INSERT INTO `"+e.db+"`.t VALUES (1, 7)",
		"CREATE TABLE `"+other+"`.t (id INT PRIMARY KEY, v VARCHAR(10) CHARACTER SET latin1 NULL)",
		"INSERT INTO `"+other+"`.t VALUES (1, 'seven')")
	connect := func(addr, db string) *client.Conn {
		c, err := client.ConnectWithTimeout(addr, e.app.name, e.app.password, db, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// One session per database through the proxy for the whole test: a
	// session remembers the plans it used last, and must not keep them
	// past a change of definition, or of what is cached: each runs the
	// statement once before its table is cached.
	sessions := map[string]*client.Conn{e.db: connect(e.proxy.addr, e.db), other: connect(e.proxy.addr, other)}
	const q = "SELECT v, id FROM t WHERE id = 1"
	for _, c := range sessions {
		if _, err := c.Execute(q); err != nil {
			t.Fatal(err)
		}
	}
	admin := e.open(t, e.admin)
	for _, db := range []string{e.db, other} {
		if _, err := admin.Exec("ALTER TABLE `" + db + "`.t CACHE"); err != nil {
			t.Fatal(err)
		}
	}
	// state also says how many reads the evaluator answered (hits that
	// did not come from the result cache).
	state := func(db string) (string, int64, int64) {
		var st string
		var version, hits, resultHits int64
		err := admin.QueryRow("SELECT state, version, hits, result_hits FROM tableproxy.cached_tables WHERE schema_name = '"+db+"' AND table_name = 't'").Scan(&st, &version, &hits, &resultHits)
		if err != nil {
			t.Fatalf("cached_tables: %v", err)
		}
		return st, version, hits - resultHits
	}
	ready := func(db string, minVersion int64) {
		waitFor(t, 20*time.Second, db+".t to be ready", func() (bool, error) {
			st, v, _ := state(db)
			return st == "ready" && v >= minVersion, fmt.Errorf("state %s, version %d", st, v)
		})
	}
	ready(e.db, 1)
	ready(other, 1)

	// check runs the statement through the proxy until it is answered
	// from memory, comparing every answer with the backend's.
	check := func(what, db string) {
		t.Helper()
		direct, proxied := connect(e.backend.Addr, db), sessions[db]
		want := describeResult(direct, q)
		_, _, hits0 := state(db)
		for i := 0; i < 3; i++ {
			if got := describeResult(proxied, q); got != want {
				t.Errorf("%s, execution %d: through the proxy\n%s\nwant (the backend's)\n%s", what, i+1, got, want)
			}
		}
		if _, _, hits := state(db); hits == hits0 {
			t.Errorf("%s: the evaluator answered none of them (hits %d)", what, hits)
		}
	}
	check("first database", e.db)
	check("second database, same statement", other)

	// A new definition between NOCACHE and CACHE: the column's length and
	// character set change, not its type.
	if _, err := admin.Exec("ALTER TABLE `" + other + "`.t NOCACHE"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec("ALTER TABLE `" + other + "`.t MODIFY v VARCHAR(30) CHARACTER SET latin1 NULL"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec("ALTER TABLE `" + other + "`.t CACHE"); err != nil {
		t.Fatal(err)
	}
	ready(other, 1)
	check("after ALTER between NOCACHE and CACHE", other)

	// A new definition behind the proxy's back: the binary log shows the
	// ALTER, and the table is loaded again.
	_, v0, _ := state(other)
	e.backend.Exec(t, "ALTER TABLE `"+other+"`.t MODIFY v VARCHAR(50) CHARACTER SET latin1 NULL")
	ready(other, v0+1)
	check("after ALTER on the backend", other)
}

// describeResult runs a statement and renders every column definition
// field and every value, or the error (a value the client cannot read as
// its column's type is one).
func describeResult(c *client.Conn, q string) string {
	r, err := c.Execute(q)
	if err != nil {
		return "error: " + err.Error()
	}
	defer r.Close()
	var b strings.Builder
	for _, f := range r.Fields {
		fmt.Fprintf(&b, "schema=%s table=%s org_table=%s name=%s org_name=%s charset=%d length=%d type=%d flag=%d decimals=%d\n",
			f.Schema, f.Table, f.OrgTable, f.Name, f.OrgName, f.Charset, f.ColumnLength, f.Type, f.Flag, f.Decimal)
	}
	for i := range r.Values {
		for j := range r.Fields {
			v, _ := r.GetString(i, j)
			fmt.Fprintf(&b, "%q ", v)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
