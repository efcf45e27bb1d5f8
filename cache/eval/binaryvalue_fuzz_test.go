package eval

import (
	"bytes"
	"math"
	"strconv"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// binaryTypes are the column types AppendBinaryValue encodes, each as the
// fuzzer picks it (by a byte modulo the list's length).
var binaryTypes = []byte{
	mysql.MYSQL_TYPE_TINY, mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_YEAR, mysql.MYSQL_TYPE_INT24,
	mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_LONGLONG, mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_DATETIME,
	mysql.MYSQL_TYPE_TIMESTAMP, mysql.MYSQL_TYPE_TIME, mysql.MYSQL_TYPE_VAR_STRING, mysql.MYSQL_TYPE_BLOB,
	mysql.MYSQL_TYPE_NEWDECIMAL, mysql.MYSQL_TYPE_JSON, mysql.MYSQL_TYPE_FLOAT,
}

// intRange is the range of an integer column type, signed or not.
func intRange(t byte, unsigned bool) (lo int64, hi uint64) {
	bits := map[byte]uint{mysql.MYSQL_TYPE_TINY: 8, mysql.MYSQL_TYPE_SHORT: 16, mysql.MYSQL_TYPE_YEAR: 16,
		mysql.MYSQL_TYPE_INT24: 24, mysql.MYSQL_TYPE_LONG: 32, mysql.MYSQL_TYPE_LONGLONG: 64}[t]
	if unsigned {
		return 0, math.MaxUint64 >> (64 - bits)
	}
	return math.MinInt64 >> (64 - bits), math.MaxInt64 >> (64 - bits)
}

// FuzzAppendBinaryValue encodes a value given as text (as the evaluator
// holds it) in the binary protocol, and decodes it with go-mysql's
// client-side decoder, the reference: what is encoded must decode without
// error, to the number given (an integer out of its type's range is
// refused, not wrapped), the bytes given (strings), and a date or time
// that encodes again to the same bytes.
func FuzzAppendBinaryValue(f *testing.F) {
	for _, s := range []struct {
		t        byte
		unsigned bool
		v        string
	}{
		{0, false, "-128"}, {0, true, "255"}, {0, false, "128"}, {5, true, "18446744073709551615"},
		{5, false, "-9223372036854775808"}, {4, false, "2147483648"}, {3, true, "16777215"},
		{6, false, "2024-02-29"}, {7, false, "2024-02-29 23:59:59.999999"}, {8, false, "0000-00-00 00:00:00"},
		{9, false, "-838:59:59"}, {9, false, "12:00:00.5"}, {10, false, "caf\xc3\xa9"}, {12, false, "-0.50"},
		{7, false, "2024-1-2 3:4:5"}, {9, false, "1:2"}, {14, false, "1.5"},
	} {
		f.Add(s.t, s.unsigned, uint8(6), s.v)
	}
	f.Fuzz(func(t *testing.T, ti byte, unsigned bool, decimals uint8, v string) {
		field := &mysql.Field{Type: binaryTypes[int(ti)%len(binaryTypes)], Decimal: decimals % 7}
		if unsigned {
			field.Flag |= mysql.UNSIGNED_FLAG
		}
		enc, ok := AppendBinaryValue(nil, field, []byte(v))
		if _, isInt := intTypes[field.Type]; isInt {
			checkInt(t, field, v, enc, ok)
			return
		}
		if !ok {
			return
		}
		got := decodeBinary(t, field, enc)
		switch field.Type {
		case mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_DATETIME, mysql.MYSQL_TYPE_TIMESTAMP, mysql.MYSQL_TYPE_TIME:
			again, ok := AppendBinaryValue(nil, field, got)
			if !ok || !bytes.Equal(again, enc) {
				t.Fatalf("%q (type %d) encoded as % x, which decodes to %q, which encodes as % x (ok %v)", v, field.Type, enc, got, again, ok)
			}
		default:
			if !bytes.Equal(got, []byte(v)) {
				t.Fatalf("%q (type %d) decodes as %q", v, field.Type, got)
			}
		}
	})
}

var intTypes = map[byte]bool{mysql.MYSQL_TYPE_TINY: true, mysql.MYSQL_TYPE_SHORT: true, mysql.MYSQL_TYPE_YEAR: true,
	mysql.MYSQL_TYPE_INT24: true, mysql.MYSQL_TYPE_LONG: true, mysql.MYSQL_TYPE_LONGLONG: true}

// checkInt: a decimal integer within the column type's range encodes to
// itself; anything else is refused.
func checkInt(t *testing.T, field *mysql.Field, v string, enc []byte, ok bool) {
	unsigned := field.Flag&mysql.UNSIGNED_FLAG != 0
	lo, hi := intRange(field.Type, unsigned)
	inRange := false
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && (n < 0 || uint64(n) <= hi) && n >= lo {
		inRange = !unsigned || n >= 0
	} else if u, err := strconv.ParseUint(v, 10, 64); err == nil && u <= hi {
		inRange = true
	}
	if inRange && v[0] == '+' {
		inRange = false // not how a value is written
	}
	if ok != inRange {
		t.Fatalf("%q (type %d, unsigned %v, range %d..%d): encoded %v, want %v", v, field.Type, unsigned, lo, hi, ok, inRange)
	}
	if !ok {
		return
	}
	got := decodeBinary(t, field, enc)
	want := intText(v)
	if string(got) != want {
		t.Fatalf("%q (type %d, unsigned %v) decodes as %q", v, field.Type, unsigned, got)
	}
}

// intText is the integer as a number prints: no leading zeros,
// no minus zero.
func intText(v string) string {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return strconv.FormatInt(n, 10)
	}
	u, _ := strconv.ParseUint(v, 10, 64)
	return strconv.FormatUint(u, 10)
}

// decodeBinary decodes a one-column binary row holding enc with go-mysql,
// and returns the value as text.
func decodeBinary(t *testing.T, field *mysql.Field, enc []byte) []byte {
	t.Helper()
	row := append([]byte{0, 0}, enc...) // header, NULL bitmap of one column
	vals, err := mysql.RowData(row).ParseBinary([]*mysql.Field{field}, nil)
	if err != nil {
		t.Fatalf("type %d: % x does not decode: %v", field.Type, enc, err)
	}
	switch v := vals[0].Value().(type) {
	case int64:
		return strconv.AppendInt(nil, v, 10)
	case uint64:
		return strconv.AppendUint(nil, v, 10)
	case []byte:
		return v
	case string:
		return []byte(v)
	default:
		t.Fatalf("type %d: decoded as %T %v", field.Type, v, v)
	}
	return nil
}
