package proxy

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/internal/testdb"
	"tableproxy/plugins"
)

// panicLog is a log that remembers whether a session panicked.
type panicLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *panicLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *panicLog) panicked() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.buf.String()
	if i := strings.Index(s, "session panic"); i >= 0 {
		return s[i:]
	}
	return ""
}

// FuzzSessionCommands sends one command packet of any kind and payload on
// a logged-in session through the proxy, to a real MariaDB: the proxy
// answers it or closes that session (as the backend would), never panics,
// and serves the next session.
func FuzzSessionCommands(f *testing.F) {
	be := testdb.Get(f)
	db := be.NewDatabase(f)
	user := be.NewUser(f, "pw", "ALL", db)
	be.Exec(f, "CREATE TABLE `"+db+"`.t (id INT PRIMARY KEY, s VARCHAR(10))", "INSERT INTO `"+db+"`.t VALUES (1, 'a')")
	log := &panicLog{}
	px := startProxy(f, be.Addr, []User{{Name: user, Password: "pw"}}, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelError}))
	}, plugins.NewChain())
	stmtID := func(id uint32, rest ...byte) []byte {
		return append(binary.LittleEndian.AppendUint32(nil, id), rest...)
	}
	for _, seed := range []struct {
		cmd     byte
		payload []byte
	}{
		{mysql.COM_QUERY, []byte("SELECT * FROM t")},
		{mysql.COM_QUERY, nil},
		{mysql.COM_INIT_DB, []byte(db)},
		{mysql.COM_INIT_DB, nil},
		{mysql.COM_FIELD_LIST, []byte("t\x00")},
		{mysql.COM_FIELD_LIST, nil},
		{mysql.COM_STMT_PREPARE, []byte("SELECT s FROM t WHERE id = ?")},
		{mysql.COM_STMT_EXECUTE, stmtID(1, 0, 1, 0, 0, 0, 0, 1)},
		{mysql.COM_STMT_EXECUTE, stmtID(1, 0, 1, 0, 0, 0, 0, 1, mysql.MYSQL_TYPE_VAR_STRING, 0, 1, '1')},
		{mysql.COM_STMT_EXECUTE, nil},
		{mysql.COM_STMT_SEND_LONG_DATA, stmtID(1, 0, 0, 'x')},
		{mysql.COM_STMT_CLOSE, stmtID(1)},
		{mysql.COM_STMT_RESET, stmtID(1)},
		{mysql.COM_STMT_FETCH, stmtID(1, 1, 0, 0, 0)},
		{mysql.COM_CHANGE_USER, []byte(user + "\x00\x00" + db + "\x00")},
		{mysql.COM_CHANGE_USER, []byte{0xff}},
		{mysql.COM_SET_OPTION, []byte{1, 0}},
		{mysql.COM_SET_OPTION, nil},
		{mysql.COM_PROCESS_KILL, []byte{1, 0, 0, 0}},
		{mysql.COM_PING, nil},
		{mysql.COM_STATISTICS, nil},
		{mysql.COM_RESET_CONNECTION, nil},
		{mysql.COM_REGISTER_SLAVE, []byte{1, 2, 3}},
		{mysql.COM_BINLOG_DUMP, []byte{4, 0, 0, 0, 0, 0, 1, 0, 0, 0}},
		{0xfe, nil},
		{0x00, nil},
	} {
		f.Add(seed.cmd, seed.payload)
	}
	f.Fuzz(func(t *testing.T, cmd byte, payload []byte) {
		if cmd == mysql.COM_QUIT || cmd == mysql.COM_SHUTDOWN {
			return
		}
		c, err := client.ConnectWithTimeout(px.addr, user, "pw", db, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// A prepared statement for the statement commands to name.
		if _, err := c.Prepare("SELECT s FROM t WHERE id = ?"); err != nil {
			t.Fatal(err)
		}
		c.ResetSequence()
		if err := c.WritePacket(append([]byte{0, 0, 0, 0, cmd}, payload...)); err != nil {
			return
		}
		// Whatever answer comes (or none: a command with no response, or a
		// session closed), within a bound.
		_ = c.SetDeadline(time.Now().Add(100 * time.Millisecond))
		for {
			if _, err := c.ReadPacket(); err != nil {
				break
			}
		}
		if p := log.panicked(); p != "" {
			t.Fatalf("command %#x %q: %s", cmd, payload, p)
		}
	})
	if p := log.panicked(); p != "" {
		f.Fatalf("a session panicked: %s", p)
	}
}
