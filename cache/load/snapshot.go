package load

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
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
// The rows are read as a stream into the copy; a table past limit (0: no
// limit) is read no further than the row that takes it past, and conn is
// then closed, the rest of its result unread.
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
	table, orderBy := mysqlwire.QuoteTable(id.Schema, id.Table), " ORDER BY "+strings.Join(order, ", ")
	s := &eval.Snapshot{ID: id, Version: v, Unchecked: unchecked}
	err = readRows(conn, "SELECT * FROM "+table+orderBy, s, pk, limit)
	var tooLarge *ErrTooLarge
	if errors.As(err, &tooLarge) {
		// The rest of the table is unread on conn: close it rather than
		// read it (the backend ends the query and its transaction).
		conn.Close()
		return nil, err
	}
	if err == nil {
		s.Floats, err = floatBits(conn, s.Fields, len(s.Rows), table, orderBy)
	}
	if _, cerr := conn.Execute("COMMIT"); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	s.LoadedAt = time.Now()
	for _, f := range s.Floats {
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

// readRows reads query's rows into s as they come, in one pass: the
// rows' bytes and the column definitions (see setFields). It stops with
// ErrTooLarge, leaving the rest of the result unread, as soon as s holds
// more than limit bytes (0: no limit).
func readRows(conn *client.Conn, query string, s *eval.Snapshot, pk []string, limit int64) error {
	var result mysql.Result
	var tooLarge error
	var scratch []byte
	// The rows are gathered in chunks and joined once at the end: a
	// slice grown row by row would allocate several times its final size.
	var chunks [][][]byte
	asText := &mysql.Field{Type: mysql.MYSQL_TYPE_STRING}
	err := conn.ExecuteSelectStreaming(query, &result, func(row []mysql.FieldValue) error {
		// The library parses each row into values it reuses for the
		// next one (and reads the next row into the same packet
		// buffer): the row is built again, then copied into memory of
		// its own.
		scratch = appendTextRow(scratch[:0], row)
		if len(chunks) == 0 || len(chunks[len(chunks)-1]) == rowChunk {
			chunks = append(chunks, make([][]byte, 0, rowChunk))
		}
		chunks[len(chunks)-1] = append(chunks[len(chunks)-1], bytes.Clone(scratch))
		s.Bytes += int64(len(scratch)) + 24
		if limit > 0 && s.Bytes > limit {
			tooLarge = &ErrTooLarge{id: s.ID, bytes: s.Bytes, limit: limit}
			return tooLarge
		}
		return nil
	}, func(r *mysql.Result) error {
		if err := setFields(s, r.Fields, pk); err != nil {
			return err
		}
		// Every value is read as the text the backend sent: a number
		// parsed and printed again may lose digits (a ZEROFILL
		// column's zeros, a FLOAT's rounding).
		for i := range r.Fields {
			r.Fields[i] = asText
		}
		return nil
	})
	if tooLarge != nil {
		return tooLarge
	}
	s.Rows = slices.Concat(chunks...)
	return err
}

// rowChunk is how many rows readRows gathers in one slice.
const rowChunk = 4096

// appendTextRow appends row, whose values were read as text, as the text
// protocol's row payload: each value a length-encoded string, NULL 0xfb.
// The backend encodes lengths in the fewest bytes, as
// AppendLengthEncodedInteger does, so this is the payload it sent.
func appendTextRow(out []byte, row []mysql.FieldValue) []byte {
	for i := range row {
		if row[i].Type == mysql.FieldValueTypeNull {
			out = append(out, 0xfb)
			continue
		}
		v := row[i].AsString()
		out = mysql.AppendLengthEncodedInteger(out, uint64(len(v)))
		out = append(out, v...)
	}
	return out
}

// floatBits reads the FLOAT and DOUBLE columns again in the binary
// protocol, within the load's transaction and in the same order (so the
// same rows), and keeps their exact values: one slice a column of fields,
// nil for the others; nil for a table without such columns.
func floatBits(conn *client.Conn, fields []*mysql.Field, rows int, table, orderBy string) ([][]uint64, error) {
	var cols []int
	var names []string
	for i, f := range fields {
		if f.Type == mysql.MYSQL_TYPE_FLOAT || f.Type == mysql.MYSQL_TYPE_DOUBLE {
			cols = append(cols, i)
			names = append(names, mysqlwire.QuoteIdent(string(f.Name)))
		}
	}
	if len(cols) == 0 {
		return nil, nil
	}
	stmt, err := conn.Prepare("SELECT " + strings.Join(names, ", ") + " FROM " + table + orderBy)
	if err != nil {
		return nil, err
	}
	defer stmt.Close()
	out := make([][]uint64, len(fields))
	for _, c := range cols {
		out[c] = make([]uint64, 0, rows)
	}
	var result mysql.Result
	err = stmt.ExecuteSelectStreaming(&result, func(row []mysql.FieldValue) error {
		for j, c := range cols {
			var bits uint64
			if row[j].Type == mysql.FieldValueTypeFloat {
				bits = math.Float64bits(row[j].AsFloat64())
			}
			out[c] = append(out[c], bits)
		}
		return nil
	}, nil)
	if err != nil {
		return nil, err
	}
	if n := len(out[cols[0]]); n != rows {
		return nil, fmt.Errorf("%s: %d rows read again for their float values, %d read first", table, n, rows)
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
