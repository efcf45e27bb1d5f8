package cache

import (
	"encoding/binary"
	"strconv"

	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/plugins"
)

// column describes a column of a result the proxy composes itself (virtual
// tables); cached reads reuse the backend's own definitions instead.
type column struct {
	name    string
	numeric bool // BIGINT NOT NULL, else VARCHAR utf8mb4
}

// appendColumnDef appends a ColumnDefinition41 payload (with an empty
// MariaDB extended-metadata field when ext is set).
func appendColumnDef(b []byte, schema, table string, c column, ext bool) []byte {
	b = appendLenEncString(b, "def")
	b = appendLenEncString(b, schema)
	b = appendLenEncString(b, table)
	b = appendLenEncString(b, table)
	b = appendLenEncString(b, c.name)
	b = appendLenEncString(b, c.name)
	if ext {
		b = append(b, 0)
	}
	b = append(b, 0x0c)
	if c.numeric {
		b = binary.LittleEndian.AppendUint16(b, 63) // binary
		b = binary.LittleEndian.AppendUint32(b, 20)
		b = append(b, mysql.MYSQL_TYPE_LONGLONG)
		b = binary.LittleEndian.AppendUint16(b, mysql.NOT_NULL_FLAG|mysql.BINARY_FLAG|mysql.NUM_FLAG)
	} else {
		b = binary.LittleEndian.AppendUint16(b, 45) // utf8mb4_general_ci
		b = binary.LittleEndian.AppendUint32(b, 4*1024)
		b = append(b, mysql.MYSQL_TYPE_VAR_STRING)
		b = binary.LittleEndian.AppendUint16(b, 0)
	}
	b = append(b, 0)       // decimals
	return append(b, 0, 0) // filler
}

func appendLenEncString(b []byte, s string) []byte {
	b = mysql.AppendLengthEncodedInteger(b, uint64(len(s)))
	return append(b, s...)
}

// writeRows writes a complete result set of string and int64 values, in
// the text or the binary protocol.
func writeRows(w plugins.ResponseWriter, schema, table string, cols []column, rows [][]any, binaryProto bool) error {
	if err := w.WritePacket(mysql.AppendLengthEncodedInteger(nil, uint64(len(cols)))); err != nil {
		return err
	}
	for _, c := range cols {
		if err := w.WritePacket(appendColumnDef(nil, schema, table, c, w.ExtendedMetadata())); err != nil {
			return err
		}
	}
	eof := func() error {
		s := w.Status()
		return w.WritePacket([]byte{0xfe, 0, 0, byte(s), byte(s >> 8)})
	}
	if err := eof(); err != nil {
		return err
	}
	for _, row := range rows {
		var b []byte
		if binaryProto {
			b = append(b, 0)                                  // packet header
			b = append(b, make([]byte, (len(cols)+7+2)/8)...) // NULL bitmap, no NULLs
		}
		for i, v := range row {
			switch x := v.(type) {
			case int64:
				if binaryProto && cols[i].numeric {
					b = binary.LittleEndian.AppendUint64(b, uint64(x))
				} else {
					b = appendLenEncString(b, strconv.FormatInt(x, 10))
				}
			case string:
				b = appendLenEncString(b, x)
			}
		}
		if err := w.WritePacket(b); err != nil {
			return err
		}
	}
	w.Rows(uint64(len(rows)))
	return eof()
}
