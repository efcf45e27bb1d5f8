package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// TestTransactions checks that a transaction's writes are invisible to
// another connection until COMMIT, and gone after ROLLBACK, through the
// proxy as directly.
func TestTransactions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	want := []string{
		"in tx: own=1 other=0 in_transaction=1",
		"committed: other=1 in_transaction=0",
		"in tx: own=2 other=1",
		"rolled back: own=1 other=1",
		"text: other=1 before commit, 2 after",
		"read-only tx write: error 1792",
	}
	for _, ep := range e.endpoints() {
		t.Run(ep.name, func(t *testing.T) {
			table := "tx_" + ep.name
			e.exec(t, "CREATE TABLE "+table+" (id INT PRIMARY KEY) ENGINE=InnoDB")
			db := e.open(t, ep, nil)
			ctx := context.Background()
			other, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			count := func(q interface {
				QueryRowContext(context.Context, string, ...any) *sql.Row
			}) int {
				t.Helper()
				var n int
				if err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			inTx := func(q interface {
				QueryRowContext(context.Context, string, ...any) *sql.Row
			}) int {
				t.Helper()
				var n int
				if err := q.QueryRowContext(ctx, "SELECT @@in_transaction").Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			var got []string

			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			mustExec(t, tx, "INSERT INTO "+table+" VALUES (1)")
			got = append(got, fmt.Sprintf("in tx: own=%d other=%d in_transaction=%d", count(tx), count(other), inTx(tx)))
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("committed: other=%d in_transaction=%d", count(other), inTx(db)))

			tx, err = db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			mustExec(t, tx, "INSERT INTO "+table+" VALUES (2)")
			got = append(got, fmt.Sprintf("in tx: own=%d other=%d", count(tx), count(other)))
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("rolled back: own=%d other=%d", count(db), count(other)))

			// The same with statements, on one pinned connection.
			c, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			mustExec(t, c, "START TRANSACTION")
			mustExec(t, c, "INSERT INTO "+table+" VALUES (3)")
			before := count(other)
			mustExec(t, c, "COMMIT")
			got = append(got, fmt.Sprintf("text: other=%d before commit, %d after", before, count(other)))

			tx, err = db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			_, err = tx.ExecContext(ctx, "INSERT INTO "+table+" VALUES (4)")
			var me *mysql.MySQLError
			errors.As(err, &me)
			if me != nil {
				got = append(got, fmt.Sprintf("read-only tx write: error %d", me.Number))
			} else {
				got = append(got, fmt.Sprintf("read-only tx write: %v", err))
			}
			_ = tx.Rollback()

			if !reflect.DeepEqual(got, want) {
				t.Errorf("observed:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		})
	}
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func mustExec(t *testing.T, db execer, q string, args ...any) sql.Result {
	t.Helper()
	r, err := db.ExecContext(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return r
}

// TestAffectedRows compares RowsAffected, LastInsertId and errors of a
// sequence of writes, with and without clientFoundRows, in the text and
// binary protocols.
func TestAffectedRows(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	steps := []struct {
		q    string
		args []any
	}{
		{"INSERT INTO %s (k, v) VALUES (?, ?), (?, ?), (?, ?)", []any{1, "a", 2, "b", 3, "c"}},
		{"INSERT INTO %s (k, v) VALUES (?, ?) ON DUPLICATE KEY UPDATE v = VALUES(v)", []any{2, "B"}},
		{"INSERT INTO %s (k, v) VALUES (?, ?) ON DUPLICATE KEY UPDATE v = VALUES(v)", []any{2, "B"}},
		{"UPDATE %s SET v = v WHERE k <= ?", []any{2}},
		{"UPDATE %s SET v = CONCAT(v, ?) WHERE k <= ?", []any{"x", 2}},
		{"REPLACE INTO %s (id, k, v) VALUES (?, ?, ?)", []any{1, 1, "r"}},
		{"INSERT IGNORE INTO %s (k, v) VALUES (?, ?), (?, ?)", []any{1, "dup", 100, "new"}},
		{"INSERT INTO %s (k, v) VALUES (?, ?)", []any{1, "dup"}},
		{"INSERT INTO %s (v) VALUES (?)", []any{"auto"}},
		{"INSERT INTO %s (id, v) VALUES (?, ?)", []any{1000, "explicit id"}},
		{"INSERT INTO %s (v) VALUES (?)", []any{"after explicit"}},
		{"DELETE FROM %s WHERE k > ?", []any{50}},
		{"UPDATE %s SET v = ? WHERE k = ?", []any{"none", -1}},
		{"DELETE FROM %s", nil},
	}
	for _, foundRows := range []bool{false, true} {
		for _, interpolate := range []bool{true, false} {
			name := fmt.Sprintf("foundRows=%v/interpolate=%v", foundRows, interpolate)
			t.Run(name, func(t *testing.T) {
				params := map[string]string{"clientFoundRows": fmt.Sprint(foundRows), "interpolateParams": fmt.Sprint(interpolate)}
				var logs [2][]string
				for i, ep := range e.endpoints() {
					table := fmt.Sprintf("ar_%d_%v_%v", i, foundRows, interpolate)
					e.exec(t, "CREATE TABLE "+table+" (id INT AUTO_INCREMENT PRIMARY KEY, k INT UNIQUE, v VARCHAR(20))")
					db := e.open(t, ep, params)
					for _, s := range steps {
						res, err := db.Exec(fmt.Sprintf(s.q, table), s.args...)
						line := s.q + ": "
						if err != nil {
							var me *mysql.MySQLError
							if errors.As(err, &me) {
								line += fmt.Sprintf("error %d (%s) %s", me.Number, me.SQLState[:], me.Message)
							} else {
								line += "error " + err.Error()
							}
						} else {
							n, err1 := res.RowsAffected()
							id, err2 := res.LastInsertId()
							line += fmt.Sprintf("affected=%d (%v) insert_id=%d (%v)", n, err1, id, err2)
						}
						logs[i] = append(logs[i], strings.ReplaceAll(line, table, "T"))
					}
				}
				for j := range logs[0] {
					if logs[0][j] != logs[1][j] {
						t.Errorf("step %d:\n  proxy:  %s\n  direct: %s", j, logs[1][j], logs[0][j])
					}
				}
				// Pin what the backend said, so that a mode that is not
				// what it claims (say, found rows off) cannot pass.
				wantUpdateNoop := "affected=0"
				if foundRows {
					wantUpdateNoop = "affected=2"
				}
				if !strings.Contains(logs[0][3], wantUpdateNoop) {
					t.Errorf("direct no-op UPDATE: %s, want %s", logs[0][3], wantUpdateNoop)
				}
				if !strings.Contains(logs[0][7], "error 1062 (23000) Duplicate entry '1' for key 'k'") {
					t.Errorf("direct duplicate: %s", logs[0][7])
				}
				if !strings.Contains(logs[0][10], "insert_id=1001") {
					t.Errorf("direct insert after explicit id: %s", logs[0][10])
				}
			})
		}
	}
}

// TestMultiStatements reads several result sets from one COM_QUERY
// (multiStatements=true) and from stored procedures, through the text and
// binary protocols.
func TestMultiStatements(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	e.exec(t,
		"CREATE TABLE ms (id INT PRIMARY KEY, v VARCHAR(10), d DECIMAL(10,2))",
		"INSERT INTO ms VALUES (1, 'one', 1.50), (2, 'two', NULL), (3, NULL, -3.25)",
		`CREATE PROCEDURE two_sets(IN n INT, OUT total INT)
		BEGIN
		  SELECT id, v FROM ms WHERE id <= n ORDER BY id;
		  SELECT COUNT(*) AS c, SUM(d) AS s, 'x' AS tag FROM ms;
		  SELECT SUM(id) INTO total FROM ms;
		END`,
		`CREATE PROCEDURE fails()
		BEGIN
		  SELECT 1 AS first;
		  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'custom failure', MYSQL_ERRNO = 1644;
		END`,
	)
	cases := []struct {
		name   string
		params map[string]string
		q      string
		args   []any
		// prepare runs the query as a prepared statement even without
		// arguments.
		prepare bool
		// sets is how many result sets the backend returns, as a sanity
		// check; go-sql-driver skips results without columns.
		sets int
	}{
		{"selects", nil, "SELECT 1 AS a, 'x' AS b; SELECT v, d FROM ms ORDER BY id; SELECT NULL AS n UNION ALL SELECT 2", nil, false, 3},
		{"with writes", nil, "SELECT COUNT(*) FROM ms; UPDATE ms SET d = d + 1 WHERE id = 1; SELECT d FROM ms WHERE id = 1; UPDATE ms SET d = d - 1 WHERE id = 1", nil, false, 2},
		{"error midway", nil, "SELECT 1 AS a; SELECT * FROM no_such_table; SELECT 2", nil, false, 1},
		{"call text", nil, "CALL two_sets(2, @total); SELECT @total AS total", nil, false, 3},
		{"call prepared", map[string]string{"multiStatements": "false"}, "CALL two_sets(?, @total)", []any{3}, true, 2},
		{"call interpolated", map[string]string{"interpolateParams": "true"}, "CALL two_sets(?, @total)", []any{3}, false, 2},
		{"signal", nil, "CALL fails()", nil, false, 1},
		{"signal prepared", map[string]string{"multiStatements": "false"}, "CALL fails()", nil, true, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			params := map[string]string{"multiStatements": "true"}
			for k, v := range c.params {
				params[k] = v
			}
			var sets [2][]resultSet
			var errs [2]error
			for i, ep := range e.endpoints() {
				db := e.open(t, ep, params)
				conn, err := db.Conn(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if c.prepare {
					sets[i], errs[i] = tryPrepared(conn, c.q, c.args...)
				} else {
					sets[i], errs[i] = tryQuery(conn, c.q, c.args...)
				}
				// The connection must be usable afterwards, in sync.
				if r := query(t, conn, "SELECT 'after' AS a"); len(r) != 1 || len(r[0].rows) != 1 {
					t.Errorf("%s: query after: %s", ep.name, summarize(r))
				}
				conn.Close()
			}
			if d := diffSets(sets[0], sets[1]); d != "" {
				t.Errorf("proxy vs direct: %s", d)
			}
			if d := sameError(errs[0], errs[1]); d != "" {
				t.Errorf("proxy vs direct: %s", d)
			}
			if len(sets[0]) < c.sets {
				t.Errorf("direct returned %d result sets (error %v), want at least %d", len(sets[0]), errs[0], c.sets)
			}
		})
	}
}

// TestBackendErrors requires errors to reach the client with the backend's
// number, SQLSTATE and message, in both protocols, and the connection to
// stay usable.
func TestBackendErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	e.exec(t,
		"CREATE TABLE err_t (id INT PRIMARY KEY, v VARCHAR(3) NOT NULL)",
		"INSERT INTO err_t VALUES (1, 'a'), (2, 'b')",
	)
	cases := []struct {
		name   string
		q      string
		args   []any
		number uint16
	}{
		{"duplicate", "INSERT INTO err_t VALUES (?, ?)", []any{1, "x"}, 1062},
		{"syntax", "SELEC ? FROM err_t", []any{1}, 1064},
		{"no table", "SELECT * FROM no_such_table WHERE id = ?", []any{1}, 1146},
		{"not null", "INSERT INTO err_t VALUES (?, ?)", []any{3, nil}, 1048},
		{"too long", "INSERT INTO err_t VALUES (?, ?)", []any{3, "abcd"}, 1406},
		// The error comes after the column definitions, in place of rows.
		{"subquery rows", "SELECT id, (SELECT id FROM err_t) AS x FROM err_t WHERE id >= ?", []any{0}, 1242},
		{"signal", "SIGNAL SQLSTATE '22012' SET MESSAGE_TEXT = 'división por cero ✗', MYSQL_ERRNO = 1365", nil, 1365},
	}
	for _, interpolate := range []bool{true, false} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/interpolate=%v", c.name, interpolate), func(t *testing.T) {
				params := map[string]string{"interpolateParams": fmt.Sprint(interpolate)}
				var errs [2]error
				for i, ep := range e.endpoints() {
					conn, err := e.open(t, ep, params).Conn(context.Background())
					if err != nil {
						t.Fatal(err)
					}
					_, errs[i] = tryQuery(conn, c.q, c.args...)
					wantServerError(t, ep.name+": "+c.q, errs[i], c.number)
					if r := query(t, conn, "SELECT 1"); len(r) != 1 || len(r[0].rows) != 1 {
						t.Errorf("%s: query after the error: %s", ep.name, summarize(r))
					}
					conn.Close()
				}
				if d := sameError(errs[0], errs[1]); d != "" {
					t.Errorf("proxy vs direct: %s", d)
				}
			})
		}
	}
}

// TestLoadDataLocal sends files with LOAD DATA LOCAL INFILE through
// go-sql-driver's reader handlers: a 3 MB file (many packets), a file the
// driver refuses to send (an empty file follows the request), and a load
// into a missing table (no file is requested).
func TestLoadDataLocal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	var data strings.Builder
	for i := 1; i <= 60000; i++ {
		fmt.Fprintf(&data, "%d,name %d with ümlauts and \"quotes\" 😀,%d.%02d\n", i, i, i%1000, i%100)
	}
	// Rows that produce warnings: a duplicate key (skipped under LOCAL), a
	// bad number, a short row.
	data.WriteString("5,duplicate,1.00\n60001,bad number,abc\n60002,short\n")
	file := data.String()
	handler := fmt.Sprintf("e2e_%p", t)
	mysql.RegisterReaderHandler(handler, func() io.Reader { return strings.NewReader(file) })
	t.Cleanup(func() { mysql.DeregisterReaderHandler(handler) })

	loads := []struct {
		name  string
		q     string
		table bool // the load writes the endpoint's table
	}{
		{"file", "LOAD DATA LOCAL INFILE 'Reader::" + handler + "' INTO TABLE %s CHARACTER SET utf8mb4 FIELDS TERMINATED BY ',' (id, name, amount)", true},
		{"refused file", "LOAD DATA LOCAL INFILE '/nonexistent/e2e-not-registered.csv' INTO TABLE %s", true},
		{"missing table", "LOAD DATA LOCAL INFILE 'Reader::" + handler + "' INTO TABLE no_such_table", false},
	}
	var logs [2][]string
	for i, ep := range e.endpoints() {
		table := "ld_" + ep.name
		e.exec(t, "CREATE TABLE "+table+" (id INT PRIMARY KEY, name VARCHAR(100), amount DECIMAL(10,2)) DEFAULT CHARSET=utf8mb4")
		conn, err := e.open(t, ep, nil).Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for _, l := range loads {
			q := l.q
			if l.table {
				q = fmt.Sprintf(q, table)
			}
			res, err := conn.ExecContext(context.Background(), q)
			line := l.name + ": "
			var me *mysql.MySQLError
			switch {
			case errors.As(err, &me):
				line += fmt.Sprintf("error %d (%s) %s", me.Number, me.SQLState[:], me.Message)
			case err != nil:
				line += "client error " + err.Error()
			default:
				n, _ := res.RowsAffected()
				line += fmt.Sprintf("affected=%d", n)
			}
			warnings := query(t, conn, "SHOW WARNINGS")
			line += " warnings=" + formatRows(warnings[0].rows)
			logs[i] = append(logs[i], strings.ReplaceAll(line, table, "T"))
		}
		sum := query(t, conn, "SELECT COUNT(*), SUM(id), SUM(amount), SUM(CRC32(name)) FROM "+table)
		logs[i] = append(logs[i], "table: "+formatRows(sum[0].rows))
	}
	for j := range logs[0] {
		if logs[0][j] != logs[1][j] {
			t.Errorf("proxy:  %s\ndirect: %s", logs[1][j], logs[0][j])
		}
	}
	if !strings.Contains(logs[0][0], "affected=60002") {
		t.Errorf("direct load: %s, want 60002 rows", logs[0][0])
	}
}
