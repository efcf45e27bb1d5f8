package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/internal/mysqlwire"
	"tableproxy/internal/testdb"
	"tableproxy/plugins"
)

// recorder answers `SELECT 'from-plugin'`, refuses statements mentioning
// forbidden, and records every outcome.
type recorder struct {
	mu       sync.Mutex
	outcomes []string
	conns    []string
}

func (r *recorder) Name() string { return "recorder" }

func (r *recorder) OnStatement(st *plugins.Statement) plugins.Action {
	switch {
	case strings.Contains(st.SQL, "forbidden"):
		return plugins.RefuseWith(mysql.NewError(mysql.ER_SPECIFIC_ACCESS_DENIED_ERROR, "refused by test"))
	case st.Command != plugins.ComStmtPrepare && (st.SQL == "SELECT 'from-plugin'" || st.SQL == "SELECT ?"):
		binary := st.Command == plugins.ComStmtExecute
		return plugins.AnswerWith(plugins.ResponderFunc(func(w plugins.ResponseWriter) error {
			rs, err := mysql.BuildSimpleResultset([]string{"answer"}, [][]any{{"from-plugin"}, {"second row"}}, binary)
			if err != nil {
				return err
			}
			return w.WriteResult(mysql.NewResult(rs))
		}))
	}
	return plugins.Continue
}

func (r *recorder) OnResult(st *plugins.Statement, out *plugins.Outcome) {
	code := 0
	if out.Err != nil {
		code = int(out.Err.Code)
	}
	r.mu.Lock()
	r.outcomes = append(r.outcomes, strings.Join([]string{st.Command.String(), st.Kind.String(), out.Source.String(),
		itoa(int(out.Rows)), itoa(int(out.AffectedRows)), itoa(code)}, "/"))
	r.mu.Unlock()
}

func (r *recorder) OnConn(ev plugins.ConnEvent) {
	r.mu.Lock()
	r.conns = append(r.conns, ev.Kind.String())
	r.mu.Unlock()
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func TestPluginChainAnswersRefusesObserves(t *testing.T) {
	be := testdb.Get(t)
	db := be.NewDatabase(t)
	user := be.NewUser(t, "pw", "ALL", db)
	rec := &recorder{}
	px := startProxy(t, be.Addr, []User{{Name: user, Password: "pw"}}, nil, plugins.NewChain(rec))

	for _, params := range []map[string]string{{"interpolateParams": "true"}, nil} {
		conn := testdb.Open(t, testdb.DSN(px.addr, user, "pw", db, params))
		rows, err := conn.Query("SELECT ?", "from-plugin")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var s string
			rows.Scan(&s)
			got = append(got, s)
		}
		rows.Close()
		if strings.Join(got, ",") != "from-plugin,second row" {
			t.Errorf("params %v: answered %v", params, got)
		}
		_, err = conn.Exec("SELECT 'forbidden', ?", 1)
		if me := myErr(t, err); me.Number != mysql.ER_SPECIFIC_ACCESS_DENIED_ERROR || me.Message != "refused by test" {
			t.Errorf("refusal: %v", me)
		}
		mustExec(t, conn, "CREATE TABLE IF NOT EXISTS o (a INT)")
		if _, err := conn.Exec("INSERT INTO o VALUES (?), (?)", 1, 2); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec("INSERT INTO missing VALUES (?)", 1); err == nil {
			t.Fatal("insert into missing table succeeded")
		}
		conn.Close()
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	joined := strings.Join(rec.outcomes, " ")
	for _, want := range []string{
		"query/select/plugin/2/0/0",       // answered in the proxy, text protocol
		"query/select/proxy/0/0/1227",     // refused
		"prepare/select/proxy/0/0/1227",   // a prepare refused
		"query/insert/backend/0/2/0",      // relayed, affected rows counted
		"query/insert/backend/0/0/1146",   // backend error seen
		"execute/select/plugin/2/0/0",     // answered in the proxy, binary protocol
		"prepare/insert/backend/0/0/0",    // prepared through the backend
		"execute/insert/backend/0/2/0",    // executed through the backend
		"prepare/insert/backend/0/0/1146", // a prepare error
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("outcome %q not seen in %s", want, joined)
		}
	}
	if c := strings.Join(rec.conns, ","); !strings.HasPrefix(c, "opened") || !strings.Contains(c, "closed") {
		t.Errorf("connection events %s", c)
	}
}

// firstExecute answers the first execute of "SELECT ? AS v" itself and
// lets the later ones through.
type firstExecute struct{ answered bool }

func (f *firstExecute) Name() string { return "first-execute" }

func (f *firstExecute) OnStatement(st *plugins.Statement) plugins.Action {
	if st.Command != plugins.ComStmtExecute || f.answered {
		return plugins.Continue
	}
	f.answered = true
	return plugins.AnswerWith(plugins.ResponderFunc(func(w plugins.ResponseWriter) error {
		rs, err := mysql.BuildSimpleResultset([]string{"v"}, [][]any{{int64(0)}}, true)
		if err != nil {
			return err
		}
		return w.WriteResult(mysql.NewResult(rs))
	}))
}

func (f *firstExecute) OnResult(*plugins.Statement, *plugins.Outcome) {}

// A client binds parameter types once, on the first execute, and sends
// them again only when they change. When a plugin answered that first
// execute, the backend never saw the types: the proxy must add them to the
// next execute it forwards, or the backend fails it with error 1210.
func TestExecuteAfterAnsweredExecuteCarriesTypes(t *testing.T) {
	c := connectThrough(t, plugins.NewChain(&firstExecute{}))
	// Prepared by hand: go-mysql's Stmt does not expose its id.
	c.ResetSequence()
	if err := c.WritePacket(append([]byte{0, 0, 0, 0, mysql.COM_STMT_PREPARE}, "SELECT ? AS v"...)); err != nil {
		t.Fatal(err)
	}
	prep, err := c.ReadPacket()
	if err != nil || prep[0] != 0 {
		t.Fatalf("prepare: %v %v", prep, err)
	}
	id := binary.LittleEndian.Uint32(prep[1:])
	for i := 0; i < 4; i++ { // a parameter, EOF, a column, EOF
		if _, err := c.ReadPacket(); err != nil {
			t.Fatal(err)
		}
	}
	execute := func(value byte, bindTypes bool) []byte {
		t.Helper()
		// COM_STMT_EXECUTE: id, flags 0, iteration count 1, NULL bitmap,
		// new-params-bound flag, [types], values (a LONGLONG).
		p := binary.LittleEndian.AppendUint32([]byte{mysql.COM_STMT_EXECUTE}, id)
		p = append(p, 0, 1, 0, 0, 0, 0)
		if bindTypes {
			p = append(p, 1, mysql.MYSQL_TYPE_LONGLONG, 0)
		} else {
			p = append(p, 0)
		}
		p = append(p, value, 0, 0, 0, 0, 0, 0, 0)
		c.ResetSequence()
		if err := c.WritePacket(append(make([]byte, 4), p...)); err != nil {
			t.Fatal(err)
		}
		var row []byte
		for n := 0; ; n++ {
			pkt, err := c.ReadPacket()
			if err != nil {
				t.Fatal(err)
			}
			if pkt[0] == mysql.ERR_HEADER {
				t.Fatalf("execute: %v", c.HandleErrorPacket(pkt))
			}
			if n > 0 && pkt[0] == 0x00 {
				row = pkt // the binary row: header, NULL bitmap, value
			}
			if pkt[0] == mysql.EOF_HEADER && len(pkt) < 9 && row != nil {
				return row
			}
		}
	}
	if row := execute(7, true); row[len(row)-8] != 0 {
		t.Fatalf("the plugin's answer: row %v", row)
	}
	if row := execute(42, false); row[len(row)-8] != 42 {
		t.Fatalf("the backend's answer: row %v", row)
	}
	if row := execute(43, false); row[len(row)-8] != 43 {
		t.Fatalf("the backend's answer: row %v", row)
	}
}

// beginWith asks for a transaction before every statement mentioning
// "with-begin", and answers those mentioning "answered" itself.
type beginWith struct{}

func (beginWith) Name() string { return "begin-with" }

func (beginWith) OnStatement(st *plugins.Statement) plugins.Action {
	if !strings.Contains(st.SQL, "with-begin") {
		return plugins.Continue
	}
	st.Begin = true
	if strings.Contains(st.SQL, "answered") {
		return plugins.AnswerWith(plugins.ResponderFunc(func(w plugins.ResponseWriter) error { return w.WriteResult(nil) }))
	}
	return plugins.Continue
}

// A filter's Begin: BEGIN reaches the backend with the statement (or
// alone, before an answered one), and the session is in a transaction
// after it; when BEGIN fails, the client gets its error, not the
// statement's result, and the connection goes on.
func TestStatementBegin(t *testing.T) {
	c := connectThrough(t, plugins.NewChain(beginWith{}))
	if _, err := c.Execute("CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"SELECT 'with-begin' AS v FROM t", "SELECT 'with-begin answered'"} {
		r, err := c.Execute(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if r.Status&mysql.SERVER_STATUS_IN_TRANS == 0 {
			t.Errorf("%s: not in a transaction after it (status %#x)", q, r.Status)
		}
		if q == "SELECT 'with-begin' AS v FROM t" && (len(r.Fields) != 1 || string(r.Fields[0].Name) != "v") {
			t.Errorf("%s: result %+v", q, r.Fields)
		}
		// The transaction is the backend's: a row inserted in it is
		// gone after ROLLBACK.
		for _, q := range []string{"INSERT INTO t VALUES (1)", "ROLLBACK"} {
			if _, err := c.Execute(q); err != nil {
				t.Fatal(err)
			}
		}
		if r, err := c.Execute("SELECT COUNT(*) FROM t"); err != nil {
			t.Fatal(err)
		} else if n, _ := r.GetInt(0, 0); n != 0 {
			t.Errorf("%s: the row inserted after it survived ROLLBACK", q)
		}
	}
	// Under an active XA transaction BEGIN fails (XAER_RMFAIL); the
	// statement, a read, runs all the same, and its result is dropped.
	for _, q := range []string{"XA START 'x'", "SELECT 'with-begin' AS v, 2 AS w UNION ALL SELECT 'again', 3"} {
		_, err := c.Execute(q)
		if q == "XA START 'x'" {
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		var me *mysql.MyError
		if !errors.As(err, &me) || me.Code != mysql.ER_XAER_RMFAIL {
			t.Fatalf("%s: %v, want BEGIN's error 1399", q, err)
		}
	}
	for _, q := range []string{"SELECT 1", "XA END 'x'", "XA ROLLBACK 'x'", "SELECT 2"} {
		if _, err := c.Execute(q); err != nil {
			t.Fatalf("%s after the failed BEGIN: %v", q, err)
		}
	}
}

// COM_RESET_CONNECTION ends the session's transaction: the plugins are told
// (a "reset" connection event), so what they hold for it ends too.
func TestResetConnectionTellsPlugins(t *testing.T) {
	rec := &recorder{}
	c := connectThrough(t, plugins.NewChain(rec))
	if _, err := c.Execute("BEGIN"); err != nil {
		t.Fatal(err)
	}
	c.ResetSequence()
	if err := c.WritePacket([]byte{0, 0, 0, 0, mysql.COM_RESET_CONNECTION}); err != nil {
		t.Fatal(err)
	}
	if p, err := c.ReadPacket(); err != nil || len(p) == 0 || p[0] != mysql.OK_HEADER {
		t.Fatalf("COM_RESET_CONNECTION: %v, %v", p, err)
	}
	if r, err := c.Execute("SELECT @@in_transaction"); err != nil {
		t.Fatal(err)
	} else if n, _ := r.GetInt(0, 0); n != 0 {
		t.Errorf("in a transaction after the reset: %d", n)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if got := strings.Join(rec.conns, ","); got != "opened,reset" {
		t.Errorf("connection events %s, want opened,reset", got)
	}
}

// connectThrough starts a proxy with chain in front of a fresh database and
// returns a connection through it, closed when the test ends.
func connectThrough(t *testing.T, chain *plugins.Chain) *client.Conn {
	t.Helper()
	be := testdb.Get(t)
	db := be.NewDatabase(t)
	user := be.NewUser(t, "pw", "ALL", db)
	px := startProxy(t, be.Addr, []User{{Name: user, Password: "pw"}}, nil, chain)
	c, err := client.Connect(px.addr, user, "pw", db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// sessionProbe reports, for each statement, whether the session's plugin
// state is new ("fresh") or left from an earlier statement ("kept").
type sessionProbe struct {
	mu   sync.Mutex
	seen []string
}

type probeKey struct{}

func (p *sessionProbe) Name() string { return "probe" }

func (p *sessionProbe) OnStatement(st *plugins.Statement) plugins.Action {
	state := "kept"
	if st.Session.Get(probeKey{}) == nil {
		state = "fresh"
		st.Session.Set(probeKey{}, true)
	}
	p.mu.Lock()
	p.seen = append(p.seen, state)
	p.mu.Unlock()
	return plugins.Continue
}

// COM_CHANGE_USER starts a new session on a new backend connection (see
// bindBackend): the plugins' state for the session starts afresh (their
// records of its transaction, the settings they learned), and statements
// prepared before it are unknown after it, as MySQL deallocates them.
func TestChangeUserStartsAFreshSession(t *testing.T) {
	probe := &sessionProbe{}
	c := connectThrough(t, plugins.NewChain(probe))
	r, err := c.Execute("SELECT SUBSTRING_INDEX(CURRENT_USER(), '@', 1)")
	if err != nil {
		t.Fatal(err)
	}
	user, _ := r.GetString(0, 0)
	stmt, err := c.Prepare("SELECT 1")
	if err != nil {
		t.Fatal(err)
	}
	// The plugin name is not one the proxy speaks: it switches to its own
	// with a new salt, which spares the test the handshake's.
	pkt := []byte{0, 0, 0, 0, mysql.COM_CHANGE_USER}
	pkt = append(append(pkt, user...), 0)
	pkt = append(pkt, 0)     // no auth data
	pkt = append(pkt, 0)     // no database
	pkt = append(pkt, 33, 0) // utf8mb3_general_ci
	pkt = append(pkt, "no_such_plugin\x00"...)
	c.ResetSequence()
	if err := c.WritePacket(pkt); err != nil {
		t.Fatal(err)
	}
	sw, err := c.ReadPacket()
	if err != nil || len(sw) < 2 || sw[0] != 0xfe {
		t.Fatalf("COM_CHANGE_USER: want an auth switch, got %v, %v", sw, err)
	}
	plugin, rest, _ := strings.Cut(string(sw[1:]), "\x00")
	if plugin != mysql.AUTH_NATIVE_PASSWORD {
		t.Fatalf("auth switch to %q", plugin)
	}
	salt := []byte(strings.TrimSuffix(rest, "\x00"))
	if err := c.WritePacket(append([]byte{0, 0, 0, 0}, mysql.CalcPassword(salt, []byte("pw"))...)); err != nil {
		t.Fatal(err)
	}
	if p, err := c.ReadPacket(); err != nil || len(p) == 0 || p[0] != mysql.OK_HEADER {
		t.Fatalf("COM_CHANGE_USER: %v, %v", p, err)
	}
	if _, err := c.Execute("USE " + c.GetDB()); err != nil {
		t.Fatal(err)
	}
	var me *mysql.MyError
	if _, err := stmt.Execute(); !errors.As(err, &me) || me.Code != mysql.ER_UNKNOWN_STMT_HANDLER {
		t.Errorf("a statement prepared before COM_CHANGE_USER, executed after it: %v; want error %d", err, mysql.ER_UNKNOWN_STMT_HANDLER)
	}
	probe.mu.Lock()
	defer probe.mu.Unlock()
	// SELECT CURRENT_USER(), the prepare, USE after the change.
	if got := strings.Join(probe.seen[:3], ","); got != "fresh,kept,fresh" {
		t.Errorf("plugin session state per statement: %s, want fresh,kept,fresh", got)
	}
}

// changeUser sends COM_CHANGE_USER for user with password pw and database
// db on c, answering the server's switch to mysql_native_password (asked
// for by naming a plugin no server speaks, so that the test needs no
// handshake salt). It returns the server's final answer.
func changeUser(t *testing.T, c *client.Conn, user, pw, db string) error {
	t.Helper()
	pkt := []byte{0, 0, 0, 0, mysql.COM_CHANGE_USER}
	pkt = append(append(pkt, user...), 0)
	pkt = append(pkt, 0) // no auth data
	pkt = append(append(pkt, db...), 0)
	pkt = append(pkt, 45, 0) // utf8mb4_general_ci
	pkt = append(pkt, "no_such_plugin\x00"...)
	pkt = append(pkt, 0) // no connection attributes (MariaDB wants their length)
	c.ResetSequence()
	if err := c.WritePacket(pkt); err != nil {
		t.Fatal(err)
	}
	p, err := c.ReadPacket()
	if err != nil {
		return err
	}
	if len(p) > 1 && p[0] == 0xfe {
		plugin, rest, _ := strings.Cut(string(p[1:]), "\x00")
		if plugin != mysql.AUTH_NATIVE_PASSWORD {
			t.Fatalf("auth switch to %q", plugin)
		}
		salt := []byte(strings.TrimSuffix(rest, "\x00"))
		if err := c.WritePacket(append([]byte{0, 0, 0, 0}, mysql.CalcPassword(salt, []byte(pw))...)); err != nil {
			t.Fatal(err)
		}
		if p, err = c.ReadPacket(); err != nil {
			return err
		}
	}
	switch {
	case len(p) > 0 && p[0] == mysql.OK_HEADER:
		return nil
	case len(p) > 0 && p[0] == mysql.ERR_HEADER:
		return mysqlwire.ParseErr(p)
	}
	return fmt.Errorf("COM_CHANGE_USER: answer %q", p)
}

// TestRefusedChangeUserClearsTheSession: a server clears the session before
// it authenticates a COM_CHANGE_USER, so a refused one still rolls back the
// transaction and drops user variables, temporary tables and prepared
// statements, and resets session variables, while the user, the database
// and the character set stay. Through the proxy the same, whether the
// proxy refuses the password or the backend the database; directly to
// MariaDB for reference.
func TestRefusedChangeUserClearsTheSession(t *testing.T) {
	f := newFixture(t, nil)
	root := f.be.Root(t)
	if _, err := root.Exec("CREATE TABLE `" + f.db + "`.cu (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	for _, refusal := range []struct{ name, pw, db string }{
		{"password", "wrong", f.db},
		{"database", f.pw, "no_such_db_" + f.db},
	} {
		var outs []string
		for _, ep := range []struct{ name, addr string }{{"direct", f.be.Addr}, {"proxy", f.px.addr}} {
			if _, err := root.Exec("DELETE FROM `" + f.db + "`.cu"); err != nil {
				t.Fatal(err)
			}
			c, err := client.Connect(ep.addr, f.user, f.pw, f.db)
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{"SET @x = 1, sql_mode = 'ANSI_QUOTES', NAMES latin1", "CREATE TEMPORARY TABLE tmp (a INT)",
				"BEGIN", "INSERT INTO cu VALUES (1)"} {
				if _, err := c.Execute(q); err != nil {
					t.Fatal(err)
				}
			}
			stmt, err := c.Prepare("SELECT 1")
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			err = changeUser(t, c, f.user, refusal.pw, refusal.db)
			var me *mysql.MyError
			if !errors.As(err, &me) {
				t.Fatalf("%s, %s: change user: %v, want a refusal", refusal.name, ep.name, err)
			}
			out = append(out, fmt.Sprint("refused ", me.Code))
			r, err := c.Execute("SELECT SUBSTRING_INDEX(CURRENT_USER(), '@', 1) = '" + f.user + "', @x, DATABASE(), " +
				"@@sql_mode = @@global.sql_mode, @@character_set_client, @@character_set_results, @@in_transaction")
			if err != nil {
				t.Fatalf("%s, %s: %v", refusal.name, ep.name, err)
			}
			for i := range r.ColumnNumber() {
				v, _ := r.GetString(0, i)
				out = append(out, v)
			}
			_, err = c.Execute("SELECT COUNT(*) FROM tmp")
			out = append(out, fmt.Sprint("temporary table: ", err))
			_, err = stmt.Execute()
			me = nil
			errors.As(err, &me) // (its message names the statement's id, which differs)
			out = append(out, fmt.Sprintf("prepared statement: %v, error %v", err == nil, me != nil && me.Code == mysql.ER_UNKNOWN_STMT_HANDLER))
			if _, err := c.Execute("COMMIT"); err != nil {
				t.Fatal(err)
			}
			var n int
			if err := root.QueryRow("SELECT COUNT(*) FROM `" + f.db + "`.cu").Scan(&n); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprint("rows committed: ", n))
			c.Close()
			outs = append(outs, strings.Join(out, "\n"))
		}
		if outs[0] != outs[1] {
			t.Errorf("refused %s: direct:\n%s\nproxy:\n%s", refusal.name, outs[0], outs[1])
		}
		if !strings.Contains(outs[0], "rows committed: 0") {
			t.Errorf("refused %s: the backend kept the transaction:\n%s", refusal.name, outs[0])
		}
	}
}
