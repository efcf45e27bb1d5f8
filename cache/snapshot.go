package cache

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/internal/mysqlwire"
	"tableproxy/lease"
)

// Snapshot is a whole table in memory, as the backend encoded it, tagged
// with the version it belongs to. It is immutable once built: a newer
// version is a new Snapshot.
type Snapshot struct {
	ID      lease.TableID
	Version lease.Version
	// epoch is the table's unguarded-write epoch when the load began
	// (tableState.epoch): a copy loaded across an unguarded write is not
	// served, whatever its version.
	epoch uint64

	// Fields are the backend's column definitions for SELECT * of the
	// table, and Rows its text-protocol row payloads in primary-key order
	// (the order InnoDB returns a plain scan in).
	Fields []*mysql.Field
	Rows   [][]byte
	// PK is the primary key's column positions in Fields.
	PK []int
	// pkNums are the rows' primary-key values, ascending, when the key is
	// one integer column (for point and range lookups).
	pkNums []num
	// ascii[i]: every value of column i is 7-bit ASCII, so any
	// ASCII-compatible character set encodes it with the same bytes;
	// bmp[i]: no value needs 4 bytes in UTF-8 (so utf8mb3 encodes it the
	// same as utf8mb4, the character set the snapshot is read in).
	ascii, bmp []bool
	// anyOrder: no backend's order to match (a virtual table's rows), so a
	// join may return its rows in the order it builds them.
	anyOrder bool
	// layout fingerprints the columns and key a plan is built against.
	layout string
	// index[i] is a sorted index of integer column i (nil for others).
	index [][]indexEntry
	// colls[i] is how string column i compares (nil: not a string column,
	// or one whose collation is left to the backend).
	colls []*collation
	// floats[i] are the exact values of FLOAT or DOUBLE column i, one per
	// row, for the binary protocol (the text the backend prints may not
	// hold every bit); nil for other columns.
	floats [][]uint64
	// strIndex[i] is the rows with a value in string column i, ordered by
	// its collation, built at the first lookup that needs it (see
	// stringIndex); nil for a snapshot without string indexes.
	strIndex []lazyIndex

	// unchecked says why the load could not make sure that its snapshot
	// holds every write the binary log showed before it (see
	// startSnapshot); empty when it did, or when the log is off.
	unchecked string

	Bytes        int64 // memory held by the snapshot, accounted
	LoadedAt     time.Time
	LoadDuration time.Duration
}

// errTooLarge says a table's data exceeds the cache's size cap.
type errTooLarge struct {
	id    lease.TableID
	bytes int64
	limit int64
}

func (e *errTooLarge) Error() string {
	return fmt.Sprintf("%s holds %d bytes, more than the cache limit of %d", e.id, e.bytes, e.limit)
}

// loadSnapshot reads the whole table in one consistent snapshot on conn.
// The caller reads the table's version before calling (with no write
// intent open), so the copy holds at least every write that version
// stands for (a write seen in the binary log, once the snapshot has
// reached the log's end: see startSnapshot); a write that lands during the
// load bumps the version past the tag, and the copy is never served.
func loadSnapshot(ctx context.Context, conn *client.Conn, id lease.TableID, v lease.Version, limit int64, colls *collations) (*Snapshot, error) {
	start := time.Now()
	if err := conn.Conn.SetDeadline(deadlineOf(ctx)); err != nil {
		return nil, err
	}
	defer conn.Conn.SetDeadline(time.Time{})
	pk, err := primaryKey(conn, id)
	if err != nil {
		return nil, err
	}
	if len(pk) == 0 {
		return nil, fmt.Errorf("%s has no primary key", id)
	}
	if why, err := unservableShape(conn, id); err != nil || why != "" {
		if err == nil {
			err = fmt.Errorf("%s: %s", id, why)
		}
		return nil, err
	}
	collByName, err := columnCollations(conn, id, colls)
	if err != nil {
		return nil, err
	}
	// TIMESTAMPs are read in UTC and shifted to each session's zone.
	if _, err := conn.Execute("SET time_zone = '" + loaderTimeZone + "'"); err != nil {
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
	s := &Snapshot{ID: id, Version: v, LoadedAt: time.Now(), unchecked: unchecked}
	for _, f := range r.Fields {
		// A field's names point into the result's packet buffer, which
		// the client library hands to the next query once r is closed:
		// parse a copy, so that they point into memory of the snapshot's
		// own.
		cp, err := mysql.FieldData(append([]byte(nil), f.Data...)).Parse()
		if err != nil {
			return nil, err
		}
		s.Fields = append(s.Fields, cp)
		s.Bytes += int64(len(f.Data)) + 64
	}
	for _, name := range pk {
		for i, f := range s.Fields {
			if strings.EqualFold(string(f.OrgName), name) {
				s.PK = append(s.PK, i)
			}
		}
	}
	s.Rows = make([][]byte, len(r.RowDatas))
	for i, row := range r.RowDatas {
		s.Rows[i] = append([]byte(nil), row...)
		s.Bytes += int64(len(row)) + 24
		if limit > 0 && s.Bytes > limit {
			return nil, &errTooLarge{id: id, bytes: s.Bytes, limit: limit}
		}
	}
	s.floats = floats
	for _, f := range floats {
		s.Bytes += int64(len(f)) * 8
	}
	s.indexPK()
	s.buildIndexes()
	s.scanCharsets()
	if err := s.learnCollations(conn, collByName); err != nil {
		return nil, err
	}
	s.reserveStringIndexes()
	if limit > 0 && s.Bytes > limit { // the indexes count too
		return nil, &errTooLarge{id: id, bytes: s.Bytes, limit: limit}
	}
	s.layout = layoutOf(s)
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
func columnCollations(conn *client.Conn, id lease.TableID, colls *collations) (map[string]*collation, error) {
	r, err := conn.Execute(`SELECT COLUMN_NAME, DATA_TYPE, IFNULL(COLLATION_NAME, 'binary'), IFNULL(CHARACTER_SET_NAME, 'binary')
		FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, id.Schema, id.Table)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	out := map[string]*collation{}
	for i := 0; i < r.RowNumber(); i++ {
		if !stringTypes[strings.ToLower(resultString(r, i, 1))] {
			continue
		}
		c, err := colls.get(conn, resultString(r, i, 2), resultString(r, i, 3))
		if err != nil {
			return nil, err
		}
		out[strings.ToLower(resultString(r, i, 0))] = c
	}
	return out, nil
}

// learnCollations attaches each string column's collation and learns the
// weights of the characters its values use.
func (s *Snapshot) learnCollations(conn *client.Conn, byName map[string]*collation) error {
	s.colls = make([]*collation, len(s.Fields))
	r := &rowCtx{snap: s}
	for i, f := range s.Fields {
		c := byName[strings.ToLower(string(f.OrgName))]
		if c == nil {
			continue
		}
		if !c.binary && !s.ascii[i] {
			var vals [][]byte
			for _, row := range s.Rows {
				if !r.setRow(row) {
					return nil
				}
				if v, null, _ := r.field(i); !null {
					vals = append(vals, v)
				}
			}
			if err := c.learn(conn, vals); err != nil {
				return err
			}
		}
		s.colls[i] = c
	}
	return nil
}

// indexPK fills pkNums for a single integer primary key.
func (s *Snapshot) indexPK() {
	if len(s.PK) != 1 || !isInteger(s.Fields[s.PK[0]]) {
		return
	}
	r := &rowCtx{snap: s}
	nums := make([]num, len(s.Rows))
	for i, row := range s.Rows {
		if !r.setRow(row) {
			return
		}
		v, null, _ := r.field(s.PK[0])
		n, ok := parseNum(v)
		if null || !ok {
			return
		}
		nums[i] = n
	}
	s.pkNums = nums
	s.Bytes += int64(len(nums)) * 16
}

func primaryKey(conn *client.Conn, id lease.TableID) ([]string, error) {
	r, err := conn.Execute(`SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE
		WHERE CONSTRAINT_NAME = 'PRIMARY' AND TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`, id.Schema, id.Table)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var cols []string
	for i := 0; i < r.RowNumber(); i++ {
		c := resultString(r, i, 0)
		cols = append(cols, c)
	}
	return cols, nil
}

// unservableShape says why id's rows cannot be served from a copy kept
// in ascending primary-key order and refreshed by the writes the proxy
// sees, or "": a part of its primary key is descending (MariaDB 10.8 and
// MySQL 8 keep such an index in descending order, and a scan returns rows
// in that order), or a foreign key of id changes its rows when its
// parent's change (ON DELETE or ON UPDATE CASCADE, SET NULL, SET DEFAULT:
// InnoDB makes those changes itself, and neither the statement, which
// names the parent, nor the binary log, which has the parent's rows only,
// says that id changed).
func unservableShape(conn *client.Conn, id lease.TableID) (string, error) {
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

// scanCharsets fills ascii and bmp.
func (s *Snapshot) scanCharsets() {
	s.ascii = make([]bool, len(s.Fields))
	s.bmp = make([]bool, len(s.Fields))
	for i := range s.Fields {
		s.ascii[i], s.bmp[i] = true, true
	}
	r := &rowCtx{snap: s}
	for _, row := range s.Rows {
		if !r.setRow(row) {
			return
		}
		for i := range s.Fields {
			v, _, _ := r.field(i)
			for _, c := range v {
				if c >= 0x80 {
					s.ascii[i] = false
				}
				if c >= 0xf0 {
					s.bmp[i] = false
				}
			}
		}
	}
}

// layoutOf fingerprints what a plan and the column metadata learned for it
// depend on: column names, types, flags, character sets, lengths and
// decimals, and the primary key.
func layoutOf(s *Snapshot) string {
	var b strings.Builder
	for _, f := range s.Fields {
		fmt.Fprintf(&b, "%s:%d:%d:%d:%d:%d;", strings.ToLower(string(f.OrgName)), f.Type, f.Flag, f.Charset, f.ColumnLength, f.Decimal)
	}
	for _, c := range s.colls {
		if c != nil {
			b.WriteString(c.name)
		}
		b.WriteByte(';')
	}
	fmt.Fprint(&b, s.PK)
	return b.String()
}

// resultString reads a string from a go-mysql result as a copy: go-mysql
// returns strings that point into buffers it reuses once the result is
// closed.
func resultString(r *mysql.Result, row, col int) string {
	s, _ := r.GetString(row, col)
	return strings.Clone(s)
}
