package e2e

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// TestMalformedExecuteGetsBackendsError: COM_STMT_EXECUTE packets a
// hostile or broken client sends (the new-params-bound flag with no types
// or values, a NULL bitmap cut short, a string length past the end) for a
// statement on a cached table, in a transaction that wrote another cached
// table, get the answer MariaDB gives them, and the session goes on as
// MariaDB's does. Afterwards both tables are served from memory again at
// once: the session held nothing past its transaction.
func TestMalformedExecuteGetsBackendsError(t *testing.T) {
	e, _ := newFidelityEnv(t)
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.cs (id INT PRIMARY KEY, v INT)",
		"INSERT INTO `"+e.db+"`.cs VALUES (1,10),(2,20),(3,30)",
		"CREATE TABLE `"+e.db+"`.cs2 (id INT PRIMARY KEY, v INT)",
		"INSERT INTO `"+e.db+"`.cs2 VALUES (3,30)")
	admin := cacheTables(t, e, map[string]int64{"cs": 3, "cs2": 1})
	const q = "SELECT id, v FROM cs WHERE id = ?"
	malformed := []struct {
		name string
		tail []byte // after the command and statement id
	}{
		{"bound flag, nothing after", []byte{0, 1, 0, 0, 0, 0, 1}},
		{"bound flag, one type byte", []byte{0, 1, 0, 0, 0, 0, 1, mysql.MYSQL_TYPE_VAR_STRING}},
		{"types, no value", []byte{0, 1, 0, 0, 0, 0, 1, mysql.MYSQL_TYPE_VAR_STRING, 0}},
		{"string length past the end", []byte{0, 1, 0, 0, 0, 0, 1, mysql.MYSQL_TYPE_VAR_STRING, 0, 0xfc, 0xff}},
		{"no bitmap", []byte{0, 1, 0, 0, 0}},
		{"no iteration count", []byte{0}},
		{"old types, value cut short", []byte{0, 1, 0, 0, 0, 0, 0, 5, '1'}},
	}
	run := func(addr string) string {
		c, err := client.ConnectWithTimeout(addr, e.app.name, e.app.password, e.db, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var out strings.Builder
		raw := rawConn{t, c}
		send, read := raw.send, raw.read
		untilEOF := func() { raw.untilEOF(nil) }
		id := raw.prepare(q)
		header := binary.LittleEndian.AppendUint32([]byte{mysql.COM_STMT_EXECUTE}, id)
		// execute sends a well-formed execute of id = key (as a string)
		// and returns the row's v, or the error.
		execute := func(key byte) string {
			send(append(append([]byte{}, header...), 0, 1, 0, 0, 0, 0, 1, mysql.MYSQL_TYPE_VAR_STRING, 0, 1, key))
			p := read()
			if p[0] == mysql.ERR_HEADER {
				return fmt.Sprintf("ERROR %d", binary.LittleEndian.Uint16(p[1:]))
			}
			read() // id
			read() // v
			read() // EOF
			row := read()
			if row[0] == mysql.EOF_HEADER {
				return "no row"
			}
			untilEOF()
			return fmt.Sprintf("%d", binary.LittleEndian.Uint32(row[len(row)-4:]))
		}
		for i := 0; i < 3; i++ { // learned: later executes are answered from memory
			execute('1')
		}
		malformedAll := func() bool {
			for _, m := range malformed {
				send(append(append([]byte{}, header...), m.tail...))
				resp, err := c.ReadPacket()
				switch {
				case err != nil:
					fmt.Fprintf(&out, "%s: connection: %v\n", m.name, err)
					return false
				case resp[0] == mysql.ERR_HEADER:
					fmt.Fprintf(&out, "%s: ERROR %d (%s)\n", m.name, binary.LittleEndian.Uint16(resp[1:]), resp[4:9])
				default:
					fmt.Fprintf(&out, "%s: answered %x\n", m.name, resp[:1])
					if resp[0] != mysql.OK_HEADER {
						read()
						read()
						read()
						untilEOF()
					}
				}
				fmt.Fprintf(&out, "  then: %s\n", execute('2'))
			}
			return true
		}
		fmt.Fprintf(&out, "outside a transaction:\n")
		if !malformedAll() {
			return out.String()
		}
		fmt.Fprintf(&out, "in a transaction that wrote cs2:\n")
		if _, err := c.Execute("BEGIN"); err != nil {
			t.Fatal(err)
		}
		// (A write of another cached table: its intent is held until the
		// transaction ends.)
		if _, err := c.Execute("UPDATE cs2 SET v = v + 1 WHERE id = 3"); err != nil {
			t.Fatal(err)
		}
		if !malformedAll() {
			return out.String()
		}
		if _, err := c.Execute("ROLLBACK"); err != nil {
			fmt.Fprintf(&out, "ROLLBACK: %v\n", err)
		}
		return out.String()
	}
	direct := run(e.backend.Addr)
	before := memoryHits(t, admin, "cs")
	proxied := run(e.proxy.addr)
	if direct != proxied {
		t.Errorf("malformed executes:\nproxy:\n%s\nMariaDB:\n%s", proxied, direct)
	}
	t.Logf("MariaDB:\n%s", direct)
	if memoryHits(t, admin, "cs") <= before {
		t.Errorf("the well-formed executes through the proxy were not answered from memory")
	}
	// The session's transaction ended: the tables are served from memory
	// again at once.
	db := e.open(t, e.app)
	for _, table := range []string{"cs", "cs2"} {
		before = memoryHits(t, admin, table)
		waitFor(t, 3*time.Second, table+" to be served from memory after the session", func() (bool, error) {
			var v int
			if err := db.QueryRow("SELECT v FROM " + table + " WHERE id = 3").Scan(&v); err != nil {
				return false, err
			}
			if v != 30 {
				return false, fmt.Errorf("read %d, want 30 (the rolled-back write)", v)
			}
			return memoryHits(t, admin, table) > before, nil
		})
	}
}

// TestStatusTablesShowWhatTheBackendShows: a user sees in
// tableproxy.cached_tables the cached tables information_schema.TABLES
// shows them directly (a grant on the table, or through the role the
// session set), and cluster_members' addresses only as an admin.
func TestStatusTablesShowWhatTheBackendShows(t *testing.T) {
	e, users := newFidelityEnv(t, "limited")
	limited := users["limited"]
	db := "`" + e.db + "`"
	e.backend.Exec(t, "CREATE TABLE "+db+".pub (id INT PRIMARY KEY)", "CREATE TABLE "+db+".secret (id INT PRIMARY KEY)",
		"CREATE TABLE "+db+".byrole (id INT PRIMARY KEY)")
	role := limited.name + "_r"
	e.backend.Exec(t, "CREATE ROLE "+role, "GRANT SELECT ON "+db+".byrole TO "+role)
	t.Cleanup(func() { e.backend.Exec(t, "DROP ROLE IF EXISTS "+role) })
	grantEverywhere(t, e.backend, "GRANT SELECT ON "+db+".pub TO %s", limited.name)
	grantEverywhere(t, e.backend, "GRANT "+role+" TO %s", limited.name)
	cacheTables(t, e, map[string]int64{"pub": 0, "secret": 0, "byrole": 0})
	p := newPair(t, e, limited)
	const direct = "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_NAME IN ('pub', 'secret', 'byrole') AND TABLE_SCHEMA = '%s' ORDER BY TABLE_NAME"
	const proxied = "SELECT table_name FROM tableproxy.cached_tables WHERE schema_name = '%s' ORDER BY table_name"
	names := func(c *sql.Conn, q string) string {
		rows, err := c.QueryContext(context.Background(), fmt.Sprintf(q, e.db))
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			out = append(out, n)
		}
		return strings.Join(out, ",")
	}
	for _, setRole := range []string{"", "SET ROLE " + role} {
		if setRole != "" {
			for _, c := range []*sql.Conn{p.proxy, p.direct} {
				if _, err := c.ExecContext(context.Background(), setRole); err != nil {
					t.Fatal(err)
				}
			}
		}
		want, got := names(p.direct, direct), names(p.proxy, proxied)
		if got != want {
			t.Errorf("%q: cached_tables lists %q, information_schema.TABLES %q", setRole, got, want)
		}
		t.Logf("%q: %s", setRole, want)
	}
	var addr sql.NullString
	if err := p.proxy.QueryRowContext(context.Background(), "SELECT address FROM tableproxy.cluster_members LIMIT 1").Scan(&addr); err != nil {
		t.Fatal(err)
	}
	if addr.Valid {
		t.Errorf("a user who is not an admin sees the cluster address %s", addr.String)
	}
	admin := e.open(t, e.admin)
	var n int
	if err := admin.QueryRow("SELECT COUNT(*) FROM tableproxy.cached_tables WHERE schema_name = '" + e.db + "' AND table_name IN ('pub', 'secret', 'byrole')").Scan(&n); err != nil || n != 3 {
		t.Errorf("the admin sees %d of the 3 cached tables (%v)", n, err)
	}
	if err := admin.QueryRow("SELECT address FROM tableproxy.cluster_members LIMIT 1").Scan(&addr); err != nil || !addr.Valid {
		t.Errorf("the admin does not see the cluster address: %v", err)
	}
}

// TestQueryLimitCountsReadsOfCachedTables: an account with
// MAX_QUERIES_PER_HOUR gets error 1226 through the proxy, reading a cached
// table, about when a direct session of an account with the same limit
// does (the proxy's own questions on the session count too): its reads are
// not answered from memory, where the backend would not count them.
func TestQueryLimitCountsReadsOfCachedTables(t *testing.T) {
	e, users := newFidelityEnv(t, "viaproxy", "direct")
	db := "`" + e.db + "`"
	e.backend.Exec(t, "CREATE TABLE "+db+".ql (id INT PRIMARY KEY)", "INSERT INTO "+db+".ql VALUES (1)")
	for _, name := range []string{"viaproxy", "direct"} {
		grantEverywhere(t, e.backend, "GRANT SELECT ON "+db+".ql TO %s", users[name].name)
		grantEverywhere(t, e.backend, "ALTER USER %s WITH MAX_QUERIES_PER_HOUR 10", users[name].name)
	}
	cacheTables(t, e, map[string]int64{"ql": 1})
	reads := func(addr string, a account) (ok int, last string) {
		c, err := client.ConnectWithTimeout(addr, a.name, a.password, e.db, 5*time.Second)
		if err != nil {
			return 0, err.Error()
		}
		defer c.Close()
		for i := 0; i < 30; i++ {
			if _, err := c.Execute("SELECT id FROM ql WHERE id = 1"); err != nil {
				return ok, err.Error()
			}
			ok++
		}
		return ok, ""
	}
	nd, ld := reads(e.backend.Addr, users["direct"])
	np, lp := reads(e.proxy.addr, users["viaproxy"])
	t.Logf("reads answered: directly %d (then %s), through the proxy %d (then %s)", nd, ld, np, lp)
	if !strings.Contains(ld, "1226") || !strings.Contains(lp, "1226") || np > nd || np < nd-3 {
		t.Errorf("reads before the limit: directly %d (%s), through the proxy %d (%s)", nd, ld, np, lp)
	}
}
