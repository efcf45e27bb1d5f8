package e2e

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// resultSet is what a client saw of one result set: column metadata as
// database/sql reports it, and the values as the driver returned them.
type resultSet struct {
	cols []string
	rows [][]any
}

// queryer is a *sql.DB, *sql.Conn or *sql.Tx.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// query runs a query and reads every result set it returns.
func query(t *testing.T, q queryer, sqlText string, args ...any) []resultSet {
	t.Helper()
	sets, err := tryQuery(q, sqlText, args...)
	if err != nil {
		t.Fatalf("%s: %v", sqlText, err)
	}
	return sets
}

// tryQuery is query returning the error, with the result sets read before
// it.
func tryQuery(q queryer, sqlText string, args ...any) ([]resultSet, error) {
	rows, err := q.QueryContext(context.Background(), sqlText, args...)
	if err != nil {
		return nil, err
	}
	return readSets(rows)
}

func readSets(rows *sql.Rows) ([]resultSet, error) {
	defer rows.Close()
	var sets []resultSet
	for {
		rs, err := readSet(rows)
		if err != nil {
			return sets, err
		}
		sets = append(sets, rs)
		if !rows.NextResultSet() {
			return sets, rows.Err()
		}
	}
}

// tryPrepared is tryQuery through an explicitly prepared statement, so that
// the binary protocol is used even without arguments.
func tryPrepared(conn *sql.Conn, sqlText string, args ...any) ([]resultSet, error) {
	stmt, err := conn.PrepareContext(context.Background(), sqlText)
	if err != nil {
		return nil, err
	}
	defer stmt.Close()
	rows, err := stmt.Query(args...)
	if err != nil {
		return nil, err
	}
	return readSets(rows)
}

func readSet(rows *sql.Rows) (resultSet, error) {
	var rs resultSet
	cts, err := rows.ColumnTypes()
	if err != nil {
		return rs, err
	}
	for _, ct := range cts {
		rs.cols = append(rs.cols, describeColumn(ct))
	}
	for rows.Next() {
		vals := make([]any, len(cts))
		ptrs := make([]any, len(cts))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		// Scanning into *any keeps the driver's own type (and copies
		// []byte), so a changed wire type shows up as a changed Go type.
		if err := rows.Scan(ptrs...); err != nil {
			return rs, err
		}
		rs.rows = append(rs.rows, vals)
	}
	return rs, rows.Err()
}

// describeColumn renders everything database/sql says about a column.
func describeColumn(ct *sql.ColumnType) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", ct.Name(), ct.DatabaseTypeName())
	if n, ok := ct.Nullable(); ok {
		fmt.Fprintf(&b, " nullable=%v", n)
	}
	if p, s, ok := ct.DecimalSize(); ok {
		fmt.Fprintf(&b, " decimal=(%d,%d)", p, s)
	}
	if l, ok := ct.Length(); ok {
		fmt.Fprintf(&b, " length=%d", l)
	}
	if st := ct.ScanType(); st != nil {
		fmt.Fprintf(&b, " scan=%s", st)
	}
	return b.String()
}

// diffSets returns a description of the first difference between two lists
// of result sets, or "".
func diffSets(want, got []resultSet) string {
	if len(want) != len(got) {
		return fmt.Sprintf("%d result sets, want %d:\n  got:  %s\n  want: %s", len(got), len(want), summarize(got), summarize(want))
	}
	for i := range want {
		if d := diffSet(want[i], got[i]); d != "" {
			return fmt.Sprintf("result set %d: %s", i, d)
		}
	}
	return ""
}

func diffSet(want, got resultSet) string {
	if !reflect.DeepEqual(want.cols, got.cols) {
		for i := 0; i < max(len(want.cols), len(got.cols)); i++ {
			var w, g string
			if i < len(want.cols) {
				w = want.cols[i]
			}
			if i < len(got.cols) {
				g = got.cols[i]
			}
			if w != g {
				return fmt.Sprintf("column %d metadata:\n  got:  %s\n  want: %s", i, g, w)
			}
		}
	}
	if len(want.rows) != len(got.rows) {
		return fmt.Sprintf("%d rows, want %d", len(got.rows), len(want.rows))
	}
	for r := range want.rows {
		for c := range want.rows[r] {
			w, g := want.rows[r][c], got.rows[r][c]
			if !reflect.DeepEqual(w, g) {
				name := fmt.Sprint(c)
				if c < len(want.cols) {
					name, _, _ = strings.Cut(want.cols[c], " ")
				}
				return fmt.Sprintf("row %d column %s:\n  got:  %s\n  want: %s", r, name, describeValue(g), describeValue(w))
			}
		}
	}
	return ""
}

func summarize(sets []resultSet) string {
	parts := make([]string, len(sets))
	for i, s := range sets {
		parts[i] = fmt.Sprintf("{%d cols, %d rows}", len(s.cols), len(s.rows))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// describeValue prints a value with its Go type, abbreviating long byte
// strings to their length, hash and first bytes.
func describeValue(v any) string {
	if b, ok := v.([]byte); ok && len(b) > 48 {
		return fmt.Sprintf("[]byte len=%d sha256=%x prefix=%q", len(b), sha256.Sum256(b), b[:32])
	}
	if s, ok := v.(string); ok && len(s) > 48 {
		return fmt.Sprintf("string len=%d prefix=%q", len(s), s[:32])
	}
	return fmt.Sprintf("%T(%#v)", v, v)
}

// formatRows renders rows compactly, byte strings as strings.
func formatRows(rows [][]any) string {
	var b strings.Builder
	for _, r := range rows {
		b.WriteString("[")
		for i, v := range r {
			if i > 0 {
				b.WriteString(" | ")
			}
			if bs, ok := v.([]byte); ok {
				b.Write(bs)
			} else {
				fmt.Fprint(&b, v)
			}
		}
		b.WriteString("]")
	}
	return b.String()
}

// sameError compares errors as a client sees them: for server errors the
// number, SQLSTATE and message; otherwise only whether there was one.
func sameError(want, got error) string {
	if want == nil && got == nil {
		return ""
	}
	if (want == nil) != (got == nil) {
		return fmt.Sprintf("error %v, want %v", got, want)
	}
	var wm, gm *mysql.MySQLError
	if errors.As(want, &wm) {
		if !errors.As(got, &gm) {
			return fmt.Sprintf("error %T %v, want server error %v", got, got, want)
		}
		if wm.Number != gm.Number || wm.SQLState != gm.SQLState || wm.Message != gm.Message {
			return fmt.Sprintf("error %d (%s) %q, want %d (%s) %q",
				gm.Number, gm.SQLState[:], gm.Message, wm.Number, wm.SQLState[:], wm.Message)
		}
	}
	return ""
}

// wantServerError checks that err is the server error number.
func wantServerError(t *testing.T, what string, err error, number uint16) {
	t.Helper()
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != number {
		t.Errorf("%s: error %v, want server error %d", what, err, number)
	}
}

// pattern returns n deterministic bytes covering every byte value, with
// the ones that need escaping in SQL text (NUL, quotes, backslash) often.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}
