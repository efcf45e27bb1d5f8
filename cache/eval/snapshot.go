package eval

import (
	"fmt"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

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
	Epoch uint64

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
	ASCII, BMP []bool
	// AnyOrder: no backend's order to match (a virtual table's rows), so a
	// join may return its rows in the order it builds them.
	AnyOrder bool
	// layout fingerprints the columns and key a plan is built against.
	Layout string
	// index[i] is a sorted index of integer column i (nil for others).
	index [][]indexEntry
	// colls[i] is how string column i compares (nil: not a string column,
	// or one whose collation is left to the backend).
	Colls []*Collation
	// floats[i] are the exact values of FLOAT or DOUBLE column i, one per
	// row, for the binary protocol (the text the backend prints may not
	// hold every bit); nil for other columns.
	Floats [][]uint64
	// strIndex[i] is the rows with a value in string column i, ordered by
	// its collation, built at the first lookup that needs it (see
	// stringIndex); nil for a snapshot without string indexes.
	strIndex []lazyIndex

	// Unchecked says why the load could not make sure that its snapshot
	// holds every write the binary log showed before it (see package
	// load's startSnapshot); empty when it did, or when the log is off.
	Unchecked string

	Bytes        int64 // memory held by the snapshot, accounted
	LoadedAt     time.Time
	LoadDuration time.Duration
}

// LearnCollations attaches each string column's collation and learns the
// weights of the characters its values use.
func (s *Snapshot) LearnCollations(conn *client.Conn, byName map[string]*Collation) error {
	s.Colls = make([]*Collation, len(s.Fields))
	r := &RowCtx{snap: s}
	for i, f := range s.Fields {
		c := byName[strings.ToLower(string(f.OrgName))]
		if c == nil {
			continue
		}
		if !c.Binary && !s.ASCII[i] {
			var vals [][]byte
			for _, row := range s.Rows {
				if !r.SetRow(row) {
					return nil
				}
				if v, null, _ := r.Field(i); !null {
					vals = append(vals, v)
				}
			}
			if err := c.learn(conn, vals); err != nil {
				return err
			}
		}
		s.Colls[i] = c
	}
	return nil
}

// IndexPK fills pkNums for a single integer primary key.
func (s *Snapshot) IndexPK() {
	if len(s.PK) != 1 || !isInteger(s.Fields[s.PK[0]]) {
		return
	}
	r := &RowCtx{snap: s}
	nums := make([]num, len(s.Rows))
	for i, row := range s.Rows {
		if !r.SetRow(row) {
			return
		}
		v, null, _ := r.Field(s.PK[0])
		n, ok := parseNum(v)
		if null || !ok {
			return
		}
		nums[i] = n
	}
	s.pkNums = nums
	s.Bytes += int64(len(nums)) * 16
}

// ScanCharsets fills ascii and bmp.
func (s *Snapshot) ScanCharsets() {
	s.ASCII = make([]bool, len(s.Fields))
	s.BMP = make([]bool, len(s.Fields))
	for i := range s.Fields {
		s.ASCII[i], s.BMP[i] = true, true
	}
	r := &RowCtx{snap: s}
	for _, row := range s.Rows {
		if !r.SetRow(row) {
			return
		}
		for i := range s.Fields {
			v, _, _ := r.Field(i)
			for _, c := range v {
				if c >= 0x80 {
					s.ASCII[i] = false
				}
				if c >= 0xf0 {
					s.BMP[i] = false
				}
			}
		}
	}
}

// LayoutOf fingerprints what a plan and the column metadata learned for it
// depend on: column names, types, flags, character sets, lengths and
// decimals, and the primary key.
func LayoutOf(s *Snapshot) string {
	var b strings.Builder
	for _, f := range s.Fields {
		fmt.Fprintf(&b, "%s:%d:%d:%d:%d:%d;", strings.ToLower(string(f.OrgName)), f.Type, f.Flag, f.Charset, f.ColumnLength, f.Decimal)
	}
	for _, c := range s.Colls {
		if c != nil {
			b.WriteString(c.Name)
		}
		b.WriteByte(';')
	}
	fmt.Fprint(&b, s.PK)
	return b.String()
}

// ResultString reads a string from a go-mysql result as a copy: go-mysql
// returns strings that point into buffers it reuses once the result is
// closed.
func ResultString(r *mysql.Result, row, col int) string {
	s, _ := r.GetString(row, col)
	return strings.Clone(s)
}
