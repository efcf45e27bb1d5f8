package proxy

import (
	"math/rand"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// TestRandomCommandPackets sends authenticated sessions malformed commands
// of every kind: each gets an error or a closed connection, never a hang,
// and the proxy keeps serving everyone else.
func TestRandomCommandPackets(t *testing.T) {
	f := newFixture(t, nil)
	watcher := f.proxyDB(t, nil)
	watcher.SetMaxOpenConns(1)
	if err := watcher.Ping(); err != nil {
		t.Fatal(err)
	}
	commands := []byte{
		mysql.COM_QUERY, mysql.COM_STMT_PREPARE, mysql.COM_STMT_EXECUTE, mysql.COM_STMT_SEND_LONG_DATA,
		mysql.COM_STMT_CLOSE, mysql.COM_STMT_RESET, mysql.COM_STMT_FETCH, mysql.COM_FIELD_LIST,
		mysql.COM_INIT_DB, mysql.COM_CHANGE_USER, mysql.COM_PROCESS_KILL, mysql.COM_SET_OPTION,
		mysql.COM_RESET_CONNECTION, mysql.COM_PING, mysql.COM_STATISTICS, mysql.COM_BINLOG_DUMP,
		mysql.COM_REGISTER_SLAVE, 0x00, 0x20, 0x7f, 0xfe, 0xff,
	}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 120; i++ {
		c, err := client.Connect(f.px.addr, f.user, f.pw, f.db)
		if err != nil {
			t.Fatalf("iteration %d: connect: %v", i, err)
		}
		payload := make([]byte, 1+rng.Intn(48))
		rng.Read(payload)
		payload[0] = commands[rng.Intn(len(commands))]
		c.ResetSequence()
		if err := c.WritePacket(append([]byte{0, 0, 0, 0}, payload...)); err != nil {
			t.Fatalf("iteration %d: write: %v", i, err)
		}
		// Read whatever comes (an answer, an error, or the end) until it
		// goes quiet: a hang on the proxy side shows up as a stuck
		// watcher query below, not here.
		_ = c.Conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		for {
			if _, err := c.ReadPacket(); err != nil {
				break
			}
		}
		c.Close()
		if got := queryString(t, watcher, "SELECT 'ok'"); got != "ok" {
			t.Fatalf("iteration %d (command %#x): watcher got %q", i, payload[0], got)
		}
	}
	// Every garbage session ended; none leaked.
	waitFor(t, func() bool { return f.px.srv.ActiveSessions() <= 1 })
}
