package e2e

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// TestCachedCursorExecute: an execute that asks for a cursor
// (CURSOR_TYPE_READ_ONLY) of a statement the proxy answers from memory
// otherwise gets a cursor from the backend, as directly: the status says
// SERVER_STATUS_CURSOR_EXISTS and the rows come with COM_STMT_FETCH.
// Answered inline, they would put the client's protocol out of step.
func TestCachedCursorExecute(t *testing.T) {
	e, _ := newFidelityEnv(t)
	e.backend.Exec(t, "CREATE TABLE `"+e.db+"`.cs (id INT PRIMARY KEY, v INT)",
		"INSERT INTO `"+e.db+"`.cs VALUES (1,10),(2,20),(3,30),(4,40),(5,50),(6,60)")
	cacheTables(t, e, map[string]int64{"cs": 6})
	const q = "SELECT id, v FROM cs WHERE id > ? ORDER BY id"
	run := func(addr string) string {
		c, err := client.ConnectWithTimeout(addr, e.app.name, e.app.password, e.db, 5*time.Second, func(c *client.Conn) error {
			return c.SetCollation("utf8mb4_general_ci")
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Learn the shape (the proxy answers later executes from memory).
		for i := 0; i < 3; i++ {
			s, err := c.Prepare(q)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Execute(3); err != nil {
				t.Fatal(err)
			}
			s.Close()
		}
		var out strings.Builder
		raw := rawConn{t, c}
		packet, read := raw.send, raw.read
		untilEOF := func() uint16 {
			return raw.untilEOF(func(p []byte) { fmt.Fprintf(&out, "row %x\n", p) })
		}
		id := raw.prepare(q)
		for round := 0; round < 2; round++ {
			exec := []byte{mysql.COM_STMT_EXECUTE}
			exec = binary.LittleEndian.AppendUint32(exec, id)
			exec = append(exec, 1)                           // CURSOR_TYPE_READ_ONLY
			exec = binary.LittleEndian.AppendUint32(exec, 1) // iteration count
			exec = append(exec, 0, 1, mysql.MYSQL_TYPE_LONGLONG, 0)
			exec = binary.LittleEndian.AppendUint64(exec, 3)
			packet(exec)
			n := read()
			for i := 0; i < int(n[0]); i++ {
				read()
			}
			status := untilEOF()
			fmt.Fprintf(&out, "execute: cursor %v\n", status&mysql.SERVER_STATUS_CURSOR_EXISTS != 0)
			for status&mysql.SERVER_STATUS_LAST_ROW_SEND == 0 && status&mysql.SERVER_STATUS_CURSOR_EXISTS != 0 {
				fetch := []byte{mysql.COM_STMT_FETCH}
				fetch = binary.LittleEndian.AppendUint32(fetch, id)
				fetch = binary.LittleEndian.AppendUint32(fetch, 2)
				packet(fetch)
				status = untilEOF()
			}
		}
		// The connection is still in step.
		r, err := c.Execute("SELECT 1")
		if err != nil {
			t.Fatalf("after the cursor: %v", err)
		}
		r.Close()
		return out.String()
	}
	direct, proxied := run(e.backend.Addr), run(e.proxy.addr)
	if direct != proxied {
		t.Errorf("cursor execute and fetch:\nproxy:\n%s\nMariaDB:\n%s", proxied, direct)
	}
	if !strings.Contains(direct, "cursor true") {
		t.Fatalf("MariaDB opened no cursor:\n%s", direct)
	}
}
