package plugins

import (
	"fmt"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// TextResultset builds a text-protocol result set of rows (int and uint
// kinds, floats, strings, []byte, time.Time or nil), the columns typed by
// their first non-NULL value, as go-mysql's BuildSimpleTextResultset does.
// It exists because that function takes its Resultset from go-mysql's
// pool, where a Result closed anywhere in the process leaves its column
// definitions behind (Reset keeps them), and keeps any it finds there: a
// column would come out under an earlier result's name, or the build
// would fail with "row types aren't consistent".
func TextResultset(names []string, rows [][]any) (*mysql.Resultset, error) {
	rs := &mysql.Resultset{Fields: make([]*mysql.Field, len(names)), FieldNames: make(map[string]int, len(names))}
	for i, name := range names {
		rs.Fields[i] = &mysql.Field{Name: []byte(name), Charset: 33, Type: mysql.MYSQL_TYPE_NULL}
		rs.FieldNames[name] = i
	}
	for n, row := range rows {
		if len(row) != len(names) {
			return nil, fmt.Errorf("row %d has %d columns, not %d", n, len(row), len(names))
		}
		var data []byte
		for i, v := range row {
			if err := typeColumn(rs.Fields[i], v); err != nil {
				return nil, err
			}
			b, err := mysql.FormatTextValue(v)
			if err != nil {
				return nil, err
			}
			if b == nil {
				data = append(data, 0xfb) // NULL
			} else {
				data = append(data, mysql.PutLengthEncodedString(b)...)
			}
		}
		rs.RowDatas = append(rs.RowDatas, data)
	}
	return rs, nil
}

// typeColumn types f by v, the first non-NULL value it meets: a column
// of numbers is binary and NOT NULL, one of text utf8 (charset 33).
func typeColumn(f *mysql.Field, v any) error {
	var typ uint8
	var charset uint16 = 63
	var flag uint16 = mysql.BINARY_FLAG | mysql.NOT_NULL_FLAG
	switch v.(type) {
	case nil:
		return nil
	case int8, int16, int32, int64, int:
		typ = mysql.MYSQL_TYPE_LONGLONG
	case uint8, uint16, uint32, uint64, uint:
		typ, flag = mysql.MYSQL_TYPE_LONGLONG, flag|mysql.UNSIGNED_FLAG
	case float32, float64:
		typ = mysql.MYSQL_TYPE_DOUBLE
	case string, []byte:
		typ, charset, flag = mysql.MYSQL_TYPE_VAR_STRING, 33, 0
	case time.Time:
		typ, charset, flag = mysql.MYSQL_TYPE_DATETIME, 33, 0
	default:
		return fmt.Errorf("a value of type %T in a result set", v)
	}
	switch f.Type {
	case mysql.MYSQL_TYPE_NULL:
		f.Type, f.Charset, f.Flag = typ, charset, flag
	case typ:
	default:
		return fmt.Errorf("column %s holds values of two types", f.Name)
	}
	return nil
}
