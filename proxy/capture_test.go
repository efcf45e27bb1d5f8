package proxy

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"tableproxy/internal/testdb"
	"tableproxy/plugins"
)

// fullCapturer asks for the whole response of every statement that
// mentions "capture" and keeps what the relay recorded.
type fullCapturer struct {
	maxBytes int
	mu       sync.Mutex
	pending  *plugins.Capture
	got      map[string]plugins.Capture
	longData map[string]bool
	execDB   map[string]string
}

func (c *fullCapturer) Name() string { return "capturer" }

func (c *fullCapturer) OnStatement(st *plugins.Statement) plugins.Action {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.Command == plugins.ComStmtExecute {
		c.longData[st.SQL] = st.LongData
		c.execDB[st.SQL] = st.DB
	}
	if !strings.Contains(st.SQL, "capture") || st.Command == plugins.ComStmtPrepare {
		return plugins.Continue
	}
	c.pending = &plugins.Capture{Full: true, MaxBytes: c.maxBytes}
	return plugins.Action{Capture: c.pending}
}

func (c *fullCapturer) OnResult(st *plugins.Statement, out *plugins.Outcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending != nil {
		c.got[strings.Clone(st.SQL)] = *c.pending
		c.pending = nil
	}
}

func TestFullCapture(t *testing.T) {
	be := testdb.Get(t)
	db := be.NewDatabase(t)
	user := be.NewUser(t, "pw", "ALL", db)
	cap := &fullCapturer{maxBytes: 4096, got: map[string]plugins.Capture{}, longData: map[string]bool{}, execDB: map[string]string{}}
	px := startProxy(t, be.Addr, []User{{Name: user, Password: "pw"}}, nil, plugins.NewChain(cap))
	conn := testdb.Open(t, testdb.DSN(px.addr, user, "pw", db, map[string]string{"multiStatements": "true", "maxAllowedPacket": "4096"}))
	mustExec(t, conn, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(6000))", "INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, REPEAT('x', 5000))")

	queries := map[string]string{
		"small":   "SELECT 'capture', id, v FROM t WHERE id < 3 ORDER BY id",
		"large":   "SELECT 'capture', id, v FROM t ORDER BY id",
		"two":     "SELECT 'capture' AS a; SELECT 2 AS b",
		"failing": "SELECT 'capture' FROM missing",
	}
	for _, q := range queries {
		rows, err := conn.Query(q)
		if err == nil {
			for rows.Next() {
			}
			rows.Close()
		}
	}
	cap.mu.Lock()
	got := cap.got
	cap.got = map[string]plugins.Capture{}
	cap.mu.Unlock()

	// Every packet, in order: column count, 3 definitions, EOF, 2 rows, EOF.
	small := got[queries["small"]]
	if small.Truncated || len(small.Ends) != 8 || small.Results != 1 || small.Ends[7] != len(small.Data) {
		t.Fatalf("small result: truncated %v, %d packets, %d results", small.Truncated, len(small.Ends), small.Results)
	}
	packet := func(c plugins.Capture, i int) []byte {
		start := 0
		if i > 0 {
			start = c.Ends[i-1]
		}
		return c.Data[start:c.Ends[i]]
	}
	if p := packet(small, 0); !bytes.Equal(p, []byte{3}) {
		t.Errorf("column count packet % x", p)
	}
	if p := packet(small, 5); !bytes.Equal(p, []byte("\x07capture\x011\x01a")) {
		t.Errorf("first row % x", p)
	}
	for _, i := range []int{4, 7} {
		if p := packet(small, i); p[0] != 0xfe || len(p) != 5 {
			t.Errorf("packet %d is not an EOF: % x", i, p)
		}
	}
	// Past the cap: nothing kept.
	if large := got[queries["large"]]; !large.Truncated || large.Data != nil || large.Ends != nil {
		t.Errorf("large result: truncated %v, %d bytes kept", large.Truncated, len(large.Data))
	}
	if two := got[queries["two"]]; two.Results != 2 {
		t.Errorf("two result sets: %d results", two.Results)
	}
	if failing := got[queries["failing"]]; failing.Results != 1 || len(failing.Ends) != 1 || packet(failing, 0)[0] != 0xff {
		t.Errorf("an error: %d results, %d packets", failing.Results, len(failing.Ends))
	}

	// A parameter longer than the driver's long-data threshold is sent with
	// COM_STMT_SEND_LONG_DATA: plugins are told.
	const q = "SELECT id FROM t WHERE v = ? OR id = ?"
	stmt, err := conn.Prepare(q)
	if err != nil {
		t.Fatal(err)
	}
	defer stmt.Close()
	longData := func(args ...any) bool {
		if _, err := stmt.Exec(args...); err != nil {
			t.Fatal(err)
		}
		cap.mu.Lock()
		defer cap.mu.Unlock()
		return cap.longData[q]
	}
	if longData("a", 1) {
		t.Error("short parameters taken for long data")
	}
	if !longData(strings.Repeat("x", 3000), 1) {
		t.Error("a long parameter not reported")
	}
	if !longData("a", 1) {
		t.Error("a statement that once had long data is taken for one without")
	}
}

// TestExecuteNamesPrepareDB: a prepared statement's names resolve against
// the database current when it was prepared, whatever USE ran since (so the
// server does); plugins are told that one.
func TestExecuteNamesPrepareDB(t *testing.T) {
	be := testdb.Get(t)
	db := be.NewDatabase(t)
	user := be.NewUser(t, "pw", "ALL", db)
	cap := &fullCapturer{got: map[string]plugins.Capture{}, longData: map[string]bool{}, execDB: map[string]string{}}
	px := startProxy(t, be.Addr, []User{{Name: user, Password: "pw"}}, nil, plugins.NewChain(cap))
	conn := testdb.Open(t, testdb.DSN(px.addr, user, "pw", db, nil))
	conn.SetMaxOpenConns(1)
	const q = "SELECT DATABASE(), ?"
	stmt, err := conn.Prepare(q)
	if err != nil {
		t.Fatal(err)
	}
	defer stmt.Close()
	mustExec(t, conn, "USE information_schema")
	var got string
	var one int
	if err := stmt.QueryRow(1).Scan(&got, &one); err != nil {
		t.Fatal(err)
	}
	cap.mu.Lock()
	defer cap.mu.Unlock()
	if got != db || cap.execDB[q] != db {
		t.Errorf("executed after USE: the server names %q, plugins were told %q; want %q", got, cap.execDB[q], db)
	}
}
