// Package testdb gives tests a real MariaDB/MySQL backend: the address and
// admin account from the environment (scripts/mariadb.sh writes them), a
// fresh database per test, and throwaway users. Tests never mock the
// backend.
//
//	TABLEPROXY_TEST_BACKEND  host:port of the backend (e.g. 127.0.0.1:3307)
//	TABLEPROXY_TEST_ROOT     user:password with ALL PRIVILEGES WITH GRANT OPTION
//	TABLEPROXY_TEST_REQUIRE  when 1, a missing backend fails the test instead of skipping it
package testdb

import (
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Backend is the test backend's address and admin account.
type Backend struct {
	Addr         string
	RootUser     string
	RootPassword string
}

// Get returns the backend, or skips (fails, under TABLEPROXY_TEST_REQUIRE=1)
// when none is configured.
func Get(t testing.TB) Backend {
	t.Helper()
	addr := os.Getenv("TABLEPROXY_TEST_BACKEND")
	root := os.Getenv("TABLEPROXY_TEST_ROOT")
	if addr == "" || root == "" {
		msg := "no test backend: run scripts/mariadb.sh start and source .run/mariadb.env"
		if os.Getenv("TABLEPROXY_TEST_REQUIRE") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	user, pw, _ := strings.Cut(root, ":")
	return Backend{Addr: addr, RootUser: user, RootPassword: pw}
}

// DSN returns a go-sql-driver DSN for user at addr, with extra parameters.
func DSN(addr, user, password, db string, params map[string]string) string {
	c := mysql.NewConfig()
	c.Net = "tcp"
	if strings.HasPrefix(addr, "/") {
		c.Net = "unix" // a socket path
	}
	c.Addr = addr
	c.User = user
	c.Passwd = password
	c.DBName = db
	c.AllowNativePasswords = true
	c.Timeout = 5 * time.Second
	c.Params = map[string]string{}
	for k, v := range params {
		switch k {
		case "multiStatements":
			c.MultiStatements = v == "true"
		case "interpolateParams":
			c.InterpolateParams = v == "true"
		case "clientFoundRows":
			c.ClientFoundRows = v == "true"
		case "allowAllFiles":
			c.AllowAllFiles = v == "true"
		case "parseTime":
			c.ParseTime = v == "true"
		case "tls":
			c.TLSConfig = v
		case "maxAllowedPacket":
			fmt.Sscan(v, &c.MaxAllowedPacket)
		default:
			c.Params[k] = v
		}
	}
	return c.FormatDSN()
}

// Open opens a database/sql handle and closes it when the test ends.
func Open(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Root opens a direct admin connection to the backend.
func (b Backend) Root(t testing.TB) *sql.DB {
	return Open(t, DSN(b.Addr, b.RootUser, b.RootPassword, "", map[string]string{"multiStatements": "true"}))
}

// Exec runs statements directly on the backend as admin, failing the test
// on error.
func (b Backend) Exec(t testing.TB, stmts ...string) {
	t.Helper()
	db := b.Root(t)
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("backend: %s: %v", s, err)
		}
	}
}

// NewDatabase creates an empty database for the test and drops it after.
func (b Backend) NewDatabase(t testing.TB) string {
	t.Helper()
	name := "tp_" + sanitize(t.Name()) + "_" + randomHex(4)
	if len(name) > 64 {
		name = name[len(name)-64:]
	}
	b.Exec(t, "CREATE DATABASE `"+name+"`")
	t.Cleanup(func() {
		db, err := sql.Open("mysql", DSN(b.Addr, b.RootUser, b.RootPassword, "", nil))
		if err == nil {
			db.Exec("DROP DATABASE IF EXISTS `" + name + "`")
			db.Close()
		}
	})
	return name
}

// NewUser creates a backend user (for 127.0.0.1 and localhost) with the
// given grants on db (e.g. "ALL"), dropped after the test. It returns the
// user name, which is unique to the test.
func (b Backend) NewUser(t testing.TB, password, grants, db string) string {
	t.Helper()
	name := "tpu_" + randomHex(5)
	for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
		b.Exec(t,
			fmt.Sprintf("CREATE USER '%s'@'%s' IDENTIFIED BY '%s'", name, host, password),
			fmt.Sprintf("GRANT %s ON `%s`.* TO '%s'@'%s'", grants, db, name, host))
	}
	t.Cleanup(func() {
		conn, err := sql.Open("mysql", DSN(b.Addr, b.RootUser, b.RootPassword, "", nil))
		if err == nil {
			for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
				conn.Exec(fmt.Sprintf("DROP USER IF EXISTS '%s'@'%s'", name, host))
			}
			conn.Close()
		}
	})
	return name
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ConnectionLost reports whether err is what go-sql-driver returns when the
// server closes the connection under a statement, as a killed or crashed
// MariaDB does: its invalid-connection error, or a bad connection.
func ConnectionLost(err error) bool {
	return errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn)
}

// BinlogDumps counts the binary log dump threads the backend (db, as an
// admin) serves user: one per replication stream.
func BinlogDumps(t testing.TB, db *sql.DB, user string) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%' AND USER = ?", user).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
