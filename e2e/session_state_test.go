package e2e

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"tableproxy/internal/testdb"
)

// TestSessionStateKeepsAnswersExact checks the session state, beside the
// transaction, that decides whether a read may be answered in memory:
// table locks, completion_type, the backend's diagnostics area, sql_mode
// flags that change values, and one moment for every cached table a
// transaction reads. Each case compares with what the backend says.
func TestSessionStateKeepsAnswersExact(t *testing.T) {
	e := newCacheEnv(t)
	e.backend.Exec(t,
		"CREATE TABLE `"+e.db+"`.kv (id INT PRIMARY KEY, v INT, s VARCHAR(10), c CHAR(6))",
		"INSERT INTO `"+e.db+"`.kv VALUES (1, 10, '', 'ab'), (2, 20, 'x', 'cd')",
		"CREATE TABLE `"+e.db+"`.kv2 (id INT PRIMARY KEY, v INT)",
		"INSERT INTO `"+e.db+"`.kv2 VALUES (1, 100)",
		"CREATE TABLE `"+e.db+"`.other (id INT PRIMARY KEY)")
	admin := e.open(t, e.admin)
	for _, tb := range []string{"kv", "kv2"} {
		if _, err := admin.Exec("ALTER TABLE " + tb + " CACHE"); err != nil {
			t.Fatal(err)
		}
	}
	waitSettled(t, admin, "kv", 2)
	waitSettled(t, admin, "kv2", 1)
	ctx := context.Background()
	conn, err := e.open(t, e.app).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	exec := func(q string) {
		t.Helper()
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	value := func(q string) string {
		t.Helper()
		var v sql.NullString
		if err := conn.QueryRowContext(ctx, q).Scan(&v); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if !v.Valid {
			return "NULL"
		}
		return v.String
	}
	servedFrom := func() (string, string) {
		t.Helper()
		return lastServedFrom(t, conn)
	}
	readKV, readKV2 := "SELECT v FROM kv WHERE id = 1", "SELECT v FROM kv2 WHERE id = 1"
	for _, q := range []string{readKV, readKV2} {
		value(q) // learn the shape
		value(q)
		if from, why := servedFrom(); from != "proxy" {
			t.Fatalf("%s: served from the %s (%s)", q, from, why)
		}
	}

	t.Run("lock tables", func(t *testing.T) {
		// (LOCK TABLES of a cached table is refused, as TiDB does; locking
		// another table still changes what the session may read.)
		exec("LOCK TABLES other READ")
		// The backend refuses tables the session did not lock; so must the
		// proxy, by asking it.
		_, err := conn.ExecContext(ctx, readKV)
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1100 {
			t.Errorf("read of an unlocked table under LOCK TABLES: %v, want error 1100", err)
		}
		if from, why := servedFrom(); from != "backend" || !strings.Contains(why, "LOCK TABLES") {
			t.Errorf("under LOCK TABLES: %s (%s)", from, why)
		}
		// BEGIN releases the locks in the backend: it is not deferred.
		exec("BEGIN")
		if from, _ := servedFrom(); from != "backend" {
			t.Errorf("BEGIN under LOCK TABLES answered by the %s", from)
		}
		if v := value(readKV2); v != "100" {
			t.Errorf("after BEGIN: %s", v)
		}
		exec("COMMIT")
		value(readKV2)
		if from, why := servedFrom(); from != "proxy" {
			t.Errorf("after the locks were released: %s (%s)", from, why)
		}
		exec("LOCK TABLES other WRITE")
		if _, err := conn.ExecContext(ctx, readKV2); !errors.As(err, &me) || me.Number != 1100 {
			t.Errorf("read of an unlocked table under LOCK TABLES: %v, want error 1100", err)
		}
		exec("UNLOCK TABLES")
		value(readKV2) // (clears the error 1100 in the backend)
		value(readKV2)
		if from, why := servedFrom(); from != "proxy" {
			t.Errorf("after UNLOCK TABLES: %s (%s)", from, why)
		}
	})

	t.Run("completion_type", func(t *testing.T) {
		exec("SET completion_type = CHAIN")
		exec("BEGIN")
		if from, _ := servedFrom(); from != "backend" {
			t.Errorf("BEGIN with completion_type CHAIN answered by the %s", from)
		}
		value(readKV)
		exec("COMMIT") // and a new transaction begins
		if v := value("SELECT @@in_transaction"); v != "1" {
			t.Errorf("@@in_transaction after COMMIT AND CHAIN = %s", v)
		}
		exec("SET completion_type = NO_CHAIN")
		exec("ROLLBACK")
		if v := value("SELECT @@in_transaction"); v != "0" {
			t.Errorf("@@in_transaction = %s", v)
		}
	})

	t.Run("warnings", func(t *testing.T) {
		value("SELECT 1/0") // a warning, in the backend's diagnostics area
		value(readKV)
		if from, why := servedFrom(); from != "backend" || !strings.Contains(why, "warnings") {
			t.Errorf("read after a warning: %s (%s)", from, why)
		}
		rows, err := conn.QueryContext(ctx, "SHOW WARNINGS")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			n++
		}
		rows.Close()
		if n != 0 {
			t.Errorf("SHOW WARNINGS after a read of a table shows %d warnings, want 0", n)
		}
		value(readKV)
		if from, why := servedFrom(); from != "proxy" {
			t.Errorf("read after the warnings were cleared: %s (%s)", from, why)
		}
	})

	t.Run("sql_mode", func(t *testing.T) {
		direct, err := testdb.Open(t, testdb.DSN(e.backend.Addr, e.backend.RootUser, e.backend.RootPassword, e.db, nil)).Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer direct.Close()
		ids := func(db interface {
			QueryContext(context.Context, string, ...any) (*sql.Rows, error)
		}, q string) string {
			t.Helper()
			rows, err := db.QueryContext(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var out []string
			for rows.Next() {
				var id string
				rows.Scan(&id)
				out = append(out, id)
			}
			return strings.Join(out, ",")
		}
		// EMPTY_STRING_IS_NULL makes the literal '' a NULL;
		// PAD_CHAR_TO_FULL_LENGTH pads CHAR values wherever they are used.
		for mode, q := range map[string]string{
			"EMPTY_STRING_IS_NULL":    "SELECT id FROM kv WHERE s = '' ORDER BY id",
			"PAD_CHAR_TO_FULL_LENGTH": "SELECT id FROM kv WHERE c LIKE 'ab' ORDER BY id",
		} {
			exec("SET sql_mode = '" + mode + "'")
			if _, err := direct.ExecContext(ctx, "SET sql_mode = '"+mode+"'"); err != nil {
				t.Fatal(err)
			}
			want := ids(direct, q)
			for i := 0; i < 2; i++ {
				if got := ids(conn, q); got != want {
					t.Errorf("%s: %s: proxy [%s], backend [%s]", mode, q, got, want)
				}
			}
		}
		exec("SET sql_mode = DEFAULT")
	})

	t.Run("one moment for every cached table", func(t *testing.T) {
		exec("BEGIN")
		if v := value(readKV); v != "10" {
			t.Fatalf("read %s", v)
		}
		v2 := versionOf(t, admin, "kv2")
		e.backend.Exec(t, "UPDATE `"+e.db+"`.kv2 SET v = 101 WHERE id = 1")
		waitState(t, admin, "kv2", "ready", 1, v2+1)
		// kv2 is first read after the write, yet the transaction sees it as
		// of its first read of a cached table, as InnoDB would.
		if v := value(readKV2); v != "100" {
			t.Errorf("kv2 read in the transaction: %s, want 100 (as of its first read)", v)
		}
		exec("COMMIT")
		waitSettled(t, admin, "kv2", 1)
		if v := value(readKV2); v != "101" {
			t.Errorf("after COMMIT: %s", v)
		}
	})
}

func versionOf(t *testing.T, db *sql.DB, table string) int64 {
	t.Helper()
	_, _, v, _ := cachedState(t, db, table)
	return v
}
