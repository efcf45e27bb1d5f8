package cache

import (
	"encoding/binary"

	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/internal/mysqlwire"
	"tableproxy/plugins"
)

// The column definitions of results the proxy composes itself (the
// virtual schema, EXPLAIN LAST STATEMENT); cached reads reuse the
// backend's own definitions instead.

// Virtual columns are BIGINT or VARCHAR(virtualVarcharChars) in utf8mb4.
const (
	virtualBigintLength = 20
	virtualVarcharChars = 1024
	charsetBinary       = 63
	charsetUTF8MB4Bin   = 46
)

// virtualField is the definition of a column of a table the proxy
// provides: BIGINT when numeric, else VARCHAR utf8mb4_bin (compared by
// bytes); either may be NULL.
func virtualField(schema, table, name string, numeric bool) *mysql.Field {
	f := &mysql.Field{Schema: []byte(schema), Table: []byte(table), OrgTable: []byte(table),
		Name: []byte(name), OrgName: []byte(name)}
	if numeric {
		f.Type, f.Charset, f.ColumnLength = mysql.MYSQL_TYPE_LONGLONG, charsetBinary, virtualBigintLength
		f.Flag = mysql.BINARY_FLAG | mysql.NUM_FLAG
	} else {
		f.Type, f.Charset, f.ColumnLength = mysql.MYSQL_TYPE_VAR_STRING, charsetUTF8MB4Bin, 4*virtualVarcharChars
	}
	return f
}

// appendFieldDef appends f as a ColumnDefinition41 payload (with an empty
// MariaDB extended-metadata field when ext is set).
func appendFieldDef(b []byte, f *mysql.Field, ext bool) []byte {
	b = mysqlwire.AppendLenEncString(b, "def")
	b = mysqlwire.AppendLenEncBytes(b, f.Schema)
	b = mysqlwire.AppendLenEncBytes(b, f.Table)
	b = mysqlwire.AppendLenEncBytes(b, f.OrgTable)
	b = mysqlwire.AppendLenEncBytes(b, f.Name)
	b = mysqlwire.AppendLenEncBytes(b, f.OrgName)
	if ext {
		b = append(b, 0)
	}
	b = append(b, 0x0c)
	b = binary.LittleEndian.AppendUint16(b, f.Charset)
	b = binary.LittleEndian.AppendUint32(b, f.ColumnLength)
	b = append(b, f.Type)
	b = binary.LittleEndian.AppendUint16(b, f.Flag)
	b = append(b, f.Decimal)
	return append(b, 0, 0) // filler
}

// composedMeta is the metadata of a result the proxy composes: fields'
// definitions, with no index-use status bits.
func composedMeta(fields []*mysql.Field, ext bool) *learned {
	defs := make([][]byte, len(fields))
	for i, f := range fields {
		defs[i] = appendFieldDef(nil, f, ext)
	}
	return &learned{defs: defs, fields: fields}
}

// writeRows writes a complete result set of fields of string, int64 and
// nil (NULL) values, in the text or the binary protocol.
func writeRows(w plugins.ResponseWriter, fields []*mysql.Field, rows [][]any, binaryProto bool) error {
	vals := make([][][]byte, len(rows))
	for i, row := range rows {
		vals[i] = make([][]byte, len(row))
		for j, v := range row {
			vals[i][j] = virtualValue(v)
		}
	}
	return writeValueRows(w, composedMeta(fields, w.ExtendedMetadata()), vals, binaryProto)
}
