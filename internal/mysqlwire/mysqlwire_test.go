package mysqlwire

import (
	"bytes"
	"math"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// Every width of the encoding, at both ends: 250 is the last one-byte
// value, 251 the first that needs 0xfc (251 is the NULL marker), and 2^16,
// 2^24 the first of 0xfd and 0xfe.
func TestLenEncIntRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		v    uint64
		want []byte
	}{
		{0, []byte{0}},
		{250, []byte{250}},
		{251, []byte{0xfc, 251, 0}},
		{1<<16 - 1, []byte{0xfc, 0xff, 0xff}},
		{1 << 16, []byte{0xfd, 0, 0, 1}},
		{1<<24 - 1, []byte{0xfd, 0xff, 0xff, 0xff}},
		{1 << 24, []byte{0xfe, 0, 0, 0, 1, 0, 0, 0, 0}},
		{math.MaxUint64, []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
	} {
		got := AppendLenEncInt([]byte("x"), tc.v)
		if !bytes.Equal(got[1:], tc.want) || got[0] != 'x' {
			t.Errorf("AppendLenEncInt(%d) = % x, want x then % x", tc.v, got, tc.want)
		}
		if lib := mysql.AppendLengthEncodedInteger(nil, tc.v); !bytes.Equal(lib, tc.want) {
			t.Errorf("go-mysql encodes %d as % x, this package as % x", tc.v, lib, tc.want)
		}
		v, n, ok := ReadLenEncInt(append(tc.want, 0xaa)) // a byte after it stays unread
		if !ok || v != tc.v || n != len(tc.want) {
			t.Errorf("ReadLenEncInt(% x) = %d, %d, %v; want %d, %d", tc.want, v, n, ok, tc.v, len(tc.want))
		}
		for cut := 0; cut < len(tc.want); cut++ {
			if _, _, ok := ReadLenEncInt(tc.want[:cut]); ok {
				t.Errorf("ReadLenEncInt read %d from %d of its %d bytes", tc.v, cut, len(tc.want))
			}
		}
	}
}

// NULL (0xfb) and an ERR marker (0xff) are no integer.
func TestReadLenEncIntRefusesNullAndErr(t *testing.T) {
	for _, b := range [][]byte{{Null}, {0xff, 0, 0}, nil} {
		if v, n, ok := ReadLenEncInt(b); ok || n != 0 || v != 0 {
			t.Errorf("ReadLenEncInt(% x) = %d, %d, %v; want not ok", b, v, n, ok)
		}
	}
}

func TestLenEncStringRoundTrip(t *testing.T) {
	for _, size := range []int{0, 1, 250, 251, 1<<16 - 1, 1 << 16, 1 << 24} {
		s := bytes.Repeat([]byte{'a'}, size)
		enc := AppendLenEncBytes(nil, s)
		if !bytes.Equal(AppendLenEncString(nil, string(s)), enc) {
			t.Fatalf("%d bytes: the string and byte forms differ", size)
		}
		got, n, ok := ReadLenEncString(append(enc, 'z'))
		if !ok || n != len(enc) || !bytes.Equal(got, s) {
			t.Fatalf("%d bytes: read %d bytes (took %d, %v)", size, len(got), n, ok)
		}
		if _, _, ok := ReadLenEncString(enc[:len(enc)-1]); ok && size > 0 {
			t.Fatalf("%d bytes: a string one byte short was read", size)
		}
	}
	if _, _, ok := ReadLenEncString([]byte{Null}); ok {
		t.Fatal("a NULL was read as a string")
	}
	// A length beyond what any slice holds is refused, not overflowed.
	huge := AppendLenEncInt(nil, math.MaxUint64)
	if _, _, ok := ReadLenEncString(append(huge, "abc"...)); ok {
		t.Fatal("a string of 2^64-1 bytes was read from 3")
	}
}

func TestReadNulString(t *testing.T) {
	b := []byte("\x01root\x00rest")
	s, next, ok := ReadNulString(b, 1)
	if !ok || s != "root" || next != 6 {
		t.Fatalf("ReadNulString = %q, %d, %v", s, next, ok)
	}
	if _, next, ok := ReadNulString(b, 6); ok || next != 6 {
		t.Fatalf("a string with no NUL was read (next %d)", next)
	}
}

func TestHeader(t *testing.T) {
	for _, n := range []int{0, 1, 251, 1 << 16, mysql.MaxPayloadLen} {
		h := Header(n, 7)
		if h[3] != 7 || PayloadLen(h[:]) != n {
			t.Errorf("Header(%d, 7) = % x reads as %d", n, h, PayloadLen(h[:]))
		}
	}
}

func TestOKRoundTrip(t *testing.T) {
	for _, ok := range []OK{{}, {AffectedRows: 251, LastInsertID: 1 << 24, Status: 0x4002, Warnings: 3},
		{AffectedRows: math.MaxUint64, LastInsertID: 1 << 16, Status: 0xffff, Warnings: 0xffff}} {
		b := AppendOK(nil, ok)
		got, valid := ParseOK(b)
		if !valid || got != ok {
			t.Errorf("%+v came back as %+v (%v) from % x", ok, got, valid, b)
		}
		if _, valid := ParseOK(b[:len(b)-1]); valid {
			t.Errorf("a truncated OK packet % x parsed", b[:len(b)-1])
		}
	}
	if _, valid := ParseOK([]byte{MarkErr, 0, 0}); valid {
		t.Error("an ERR packet parsed as OK")
	}
}

func TestEOFRoundTrip(t *testing.T) {
	b := AppendEOF(nil, 2, 0x0022)
	if !bytes.Equal(b, []byte{MarkEOF, 2, 0, 0x22, 0}) || !IsEOF(b) {
		t.Fatalf("AppendEOF = % x", b)
	}
	if w, s := ParseEOF(b); w != 2 || s != 0x0022 {
		t.Fatalf("ParseEOF = %d, %#x", w, s)
	}
	// A row whose first value's length starts with 0xfe is 9 bytes or more.
	row := AppendLenEncInt(nil, 1<<24)
	if IsEOF(row) || IsEOF(nil) {
		t.Fatal("a long row or nothing read as EOF")
	}
}

func TestErrRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		in, out mysql.MyError
	}{
		{mysql.MyError{Code: 1146, State: "42S02", Message: "Table 's.t' doesn't exist"},
			mysql.MyError{Code: 1146, State: "42S02", Message: "Table 's.t' doesn't exist"}},
		// No SQLSTATE (an error from before the login) goes on without one,
		// which reads back as the default state.
		{mysql.MyError{Code: 1040, Message: "Too many connections"},
			mysql.MyError{Code: 1040, State: mysql.DEFAULT_MYSQL_STATE, Message: "Too many connections"}},
		// A state of the wrong size is replaced by the default.
		{mysql.MyError{Code: 1064, State: "4200", Message: "syntax"},
			mysql.MyError{Code: 1064, State: mysql.DEFAULT_MYSQL_STATE, Message: "syntax"}},
	} {
		got := ParseErr(AppendErr(nil, &tc.in))
		if *got != tc.out {
			t.Errorf("%+v came back as %+v, want %+v", tc.in, *got, tc.out)
		}
	}
	// Without a state, not even the '#' goes on: the code, then the message.
	if p := AppendErr(nil, &mysql.MyError{Code: 1040, Message: "Too many connections"}); !bytes.Equal(p, append([]byte{MarkErr, 0x10, 0x04}, "Too many connections"...)) {
		t.Errorf("an error without a state was written as % x", p)
	}
	if e := ParseErr([]byte{MarkOK}); e.Code != mysql.ER_UNKNOWN_ERROR {
		t.Errorf("an OK packet read as error %d", e.Code)
	}
}

func TestQuote(t *testing.T) {
	for _, tc := range [][2]string{
		{QuoteIdent("t"), "`t`"},
		{QuoteIdent("a`b"), "`a``b`"},
		{QuoteIdent(""), "``"},
		{QuoteTable("s", "t`"), "`s`.`t```"},
		{QuoteString("it's"), `'it''s'`},
		{QuoteString(`a\'b`), `'a\\''b'`},
		{QuoteString(""), `''`},
	} {
		if tc[0] != tc[1] {
			t.Errorf("got %s, want %s", tc[0], tc[1])
		}
	}
	// The names of character sets and collations hold nothing either way
	// of quoting escapes: they come out as with go-mysql's Escape.
	for _, name := range []string{"utf8mb4", "utf8mb4_uca1400_ai_ci", "latin1_swedish_ci", "binary"} {
		if got, want := QuoteString(name), "'"+mysql.Escape(name)+"'"; got != want {
			t.Errorf("QuoteString(%q) = %s, want %s", name, got, want)
		}
	}
}

// The appenders write into the caller's buffer: nothing is allocated
// when it has room.
func TestAppendersDoNotAllocate(t *testing.T) {
	buf := make([]byte, 0, 256)
	s := []byte("value")
	allocs := testing.AllocsPerRun(100, func() {
		b := AppendLenEncInt(buf[:0], 1<<20)
		b = AppendLenEncBytes(b, s)
		b = AppendLenEncString(b, "def")
		b = AppendOK(b, OK{AffectedRows: 1})
		_ = AppendEOF(b, 0, 2)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run, want 0", allocs)
	}
}

// A column definition's names end before its extended metadata, and a
// definition cut short among its names has no such place.
func TestColumnNamesEnd(t *testing.T) {
	var def []byte
	for _, name := range []string{"def", "db", "t", "t", "c", "c"} {
		def = AppendLenEncString(def, name)
	}
	names := len(def)
	def = append(def, 0x0c, 0x21, 0)
	if end, ok := ColumnNamesEnd(def); !ok || end != names {
		t.Errorf("ColumnNamesEnd = %d, %v; want %d, true", end, ok, names)
	}
	if _, ok := ColumnNamesEnd(def[:names-2]); ok {
		t.Error("a definition cut short among its names has an end")
	}
}
