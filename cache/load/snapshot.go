package load

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/cache/eval"
	"tableproxy/internal/mysqlwire"
	"tableproxy/lease"
)

// ErrTooLarge says a table's data exceeds the cache's size cap.
type ErrTooLarge struct {
	id    lease.TableID
	bytes int64
	limit int64
}

func (e *ErrTooLarge) Error() string {
	return fmt.Sprintf("%s holds %d bytes, more than the cache limit of %d", e.id, e.bytes, e.limit)
}

// Snapshot reads the whole table in one consistent snapshot on conn.
// The caller reads the table's version before calling (with no write
// intent open), so the copy holds at least every write that version
// stands for (a write seen in the binary log, once the snapshot has
// reached the log's end: see startSnapshot); a write that lands during the
// load bumps the version past the tag, and the copy is never served.
func Snapshot(ctx context.Context, conn *client.Conn, id lease.TableID, v lease.Version, limit int64, colls *eval.Collations) (*eval.Snapshot, error) {
	start := time.Now()
	if err := conn.Conn.SetDeadline(deadlineOf(ctx)); err != nil {
		return nil, err
	}
	defer conn.Conn.SetDeadline(time.Time{})
	pk, collByName, err := definitionOf(conn, id, colls)
	if err != nil {
		return nil, err
	}
	// TIMESTAMPs are read in UTC and shifted to each session's zone.
	if _, err := conn.Execute("SET time_zone = '" + eval.LoaderTimeZone + "'"); err != nil {
		return nil, err
	}
	if _, err := conn.Execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
		return nil, err
	}
	unchecked, err := startSnapshot(ctx, conn, nil)
	if err != nil {
		return nil, err
	}
	order := make([]string, len(pk))
	for i, c := range pk {
		order[i] = mysqlwire.QuoteIdent(c)
	}
	query := fmt.Sprintf("SELECT * FROM %s ORDER BY %s", mysqlwire.QuoteTable(id.Schema, id.Table), strings.Join(order, ", "))
	r, err := conn.Execute(query)
	var floats [][]uint64
	if err == nil {
		floats, err = floatBits(conn, query, r.Fields)
	}
	if _, cerr := conn.Execute("COMMIT"); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	defer r.Close()
	s := &eval.Snapshot{ID: id, Version: v, LoadedAt: time.Now(), Unchecked: unchecked}
	if err := setFields(s, r.Fields, pk); err != nil {
		return nil, err
	}
	s.Rows = make([][]byte, len(r.RowDatas))
	for i, row := range r.RowDatas {
		s.Rows[i] = append([]byte(nil), row...)
		s.Bytes += int64(len(row)) + 24
		if limit > 0 && s.Bytes > limit {
			return nil, &ErrTooLarge{id: id, bytes: s.Bytes, limit: limit}
		}
	}
	s.Floats = floats
	for _, f := range floats {
		s.Bytes += int64(len(f)) * 8
	}
	if err := index(s, conn, collByName); err != nil {
		return nil, err
	}
	if limit > 0 && s.Bytes > limit { // the indexes count too
		return nil, &ErrTooLarge{id: id, bytes: s.Bytes, limit: limit}
	}
	s.Layout = eval.LayoutOf(s)
	s.LoadDuration = time.Since(start)
	return s, nil
}

// floatBits reads the FLOAT and DOUBLE columns again in the binary
// protocol, within the load's transaction (so the same rows in the same
// order), and keeps their exact values.
func floatBits(conn *client.Conn, query string, fields []*mysql.Field) ([][]uint64, error) {
	has := false
	for _, f := range fields {
		has = has || f.Type == mysql.MYSQL_TYPE_FLOAT || f.Type == mysql.MYSQL_TYPE_DOUBLE
	}
	if !has {
		return nil, nil
	}
	stmt, err := conn.Prepare(query)
	if err != nil {
		return nil, err
	}
	defer stmt.Close()
	r, err := stmt.Execute()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	out := make([][]uint64, len(fields))
	for c, f := range fields {
		if f.Type != mysql.MYSQL_TYPE_FLOAT && f.Type != mysql.MYSQL_TYPE_DOUBLE {
			continue
		}
		out[c] = make([]uint64, len(r.Values))
		for i, row := range r.Values {
			if row[c].Type == mysql.FieldValueTypeFloat {
				out[c][i] = math.Float64bits(row[c].AsFloat64())
			}
		}
	}
	return out, nil
}

// columnCollations reads how each string column of id compares, by
// column name (lower case).
func columnCollations(conn *client.Conn, id lease.TableID, colls *eval.Collations) (map[string]*eval.Collation, error) {
	r, err := conn.Execute(`SELECT COLUMN_NAME, DATA_TYPE, IFNULL(COLLATION_NAME, 'binary'), IFNULL(CHARACTER_SET_NAME, 'binary')
		FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, id.Schema, id.Table)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	out := map[string]*eval.Collation{}
	for i := 0; i < r.RowNumber(); i++ {
		if !eval.StringTypes[strings.ToLower(eval.ResultString(r, i, 1))] {
			continue
		}
		c, err := colls.Get(conn, eval.ResultString(r, i, 2), eval.ResultString(r, i, 3))
		if err != nil {
			return nil, err
		}
		out[strings.ToLower(eval.ResultString(r, i, 0))] = c
	}
	return out, nil
}

// PrimaryKey lists the columns of id's primary key, in key order.
func PrimaryKey(conn *client.Conn, id lease.TableID) ([]string, error) {
	r, err := conn.Execute(`SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE
		WHERE CONSTRAINT_NAME = 'PRIMARY' AND TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`, id.Schema, id.Table)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var cols []string
	for i := 0; i < r.RowNumber(); i++ {
		c := eval.ResultString(r, i, 0)
		cols = append(cols, c)
	}
	return cols, nil
}

// UnservableShape says why id's rows cannot be served from a copy kept
// in ascending primary-key order and refreshed by the writes the proxy
// sees, or "": a part of its primary key is descending (MariaDB 10.8 and
// MySQL 8 keep such an index in descending order, and a scan returns rows
// in that order), or a foreign key of id changes its rows when its
// parent's change (ON DELETE or ON UPDATE CASCADE, SET NULL, SET DEFAULT:
// InnoDB makes those changes itself, and neither the statement, which
// names the parent, nor the binary log, which has the parent's rows only,
// says that id changed).
func UnservableShape(conn *client.Conn, id lease.TableID) (string, error) {
	for _, c := range []struct{ why, query string }{
		{"table with a descending primary key", `SELECT COUNT(*) FROM information_schema.STATISTICS
			WHERE INDEX_NAME = 'PRIMARY' AND COLLATION = 'D' AND TABLE_SCHEMA = ? AND TABLE_NAME = ?`},
		{"table changed by a foreign key's cascade", `SELECT COUNT(*) FROM information_schema.REFERENTIAL_CONSTRAINTS
			WHERE CONSTRAINT_SCHEMA = ? AND TABLE_NAME = ?
			AND (DELETE_RULE NOT IN ('RESTRICT', 'NO ACTION') OR UPDATE_RULE NOT IN ('RESTRICT', 'NO ACTION'))`},
	} {
		r, err := conn.Execute(c.query, id.Schema, id.Table)
		if err != nil {
			return "", err
		}
		n, _ := r.GetInt(0, 0)
		r.Close()
		if n > 0 {
			return c.why, nil
		}
	}
	return "", nil
}

func deadlineOf(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Time{}
}
