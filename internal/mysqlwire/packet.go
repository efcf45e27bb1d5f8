package mysqlwire

import (
	"encoding/binary"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// HeaderLen is the size of a packet's header: the payload's length in
// three little-endian bytes, then the sequence number.
const HeaderLen = 4

// Header is the header of a packet whose payload is n bytes (at most
// mysql.MaxPayloadLen: a longer payload is split) with sequence number seq.
func Header(n int, seq uint8) [HeaderLen]byte {
	return [HeaderLen]byte{byte(n), byte(n >> 8), byte(n >> 16), seq}
}

// PayloadLen is the payload length a packet header (at least HeaderLen
// bytes) announces.
func PayloadLen(hdr []byte) int {
	return int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
}

// The first byte of a response's payload.
const (
	MarkOK         = 0x00
	MarkLocalInfil = 0xfb // LOAD DATA LOCAL: the server asks for a file
	MarkEOF        = 0xfe
	MarkErr        = 0xff
)

// IsEOF reports whether payload is an EOF packet, and not a row that
// starts with a 0xfe length prefix (which is at least 9 bytes long).
func IsEOF(payload []byte) bool {
	return len(payload) > 0 && payload[0] == MarkEOF && len(payload) < 9
}

// AppendEOF appends an EOF packet's payload.
func AppendEOF(b []byte, warnings, status uint16) []byte {
	return append(b, MarkEOF, byte(warnings), byte(warnings>>8), byte(status), byte(status>>8))
}

// ParseEOF returns the warnings and status flags of an EOF packet's
// payload (zero when it is too short to have them).
func ParseEOF(payload []byte) (warnings, status uint16) {
	if len(payload) >= 5 {
		warnings = binary.LittleEndian.Uint16(payload[1:])
		status = binary.LittleEndian.Uint16(payload[3:])
	}
	return
}

// OK is what an OK packet says.
type OK struct {
	AffectedRows uint64
	LastInsertID uint64
	Status       uint16
	Warnings     uint16
}

// AppendOK appends an OK packet's payload.
func AppendOK(b []byte, ok OK) []byte {
	b = append(b, MarkOK)
	b = AppendLenEncInt(b, ok.AffectedRows)
	b = AppendLenEncInt(b, ok.LastInsertID)
	return append(b, byte(ok.Status), byte(ok.Status>>8), byte(ok.Warnings), byte(ok.Warnings>>8))
}

// ParseOK reads an OK packet's payload (protocol 4.1); false when payload
// is not one.
func ParseOK(payload []byte) (OK, bool) {
	var ok OK
	if len(payload) < 1 || payload[0] != MarkOK {
		return ok, false
	}
	pos := 1
	var n int
	var valid bool
	if ok.AffectedRows, n, valid = ReadLenEncInt(payload[pos:]); !valid {
		return ok, false
	}
	pos += n
	if ok.LastInsertID, n, valid = ReadLenEncInt(payload[pos:]); !valid {
		return ok, false
	}
	pos += n
	if pos+4 > len(payload) {
		return ok, false
	}
	ok.Status = binary.LittleEndian.Uint16(payload[pos:])
	ok.Warnings = binary.LittleEndian.Uint16(payload[pos+2:])
	return ok, true
}

// AppendErr appends an ERR packet's payload (protocol 4.1).
func AppendErr(b []byte, e *mysql.MyError) []byte {
	b = append(b, MarkErr, byte(e.Code), byte(e.Code>>8))
	// A backend's error from before its login (1040, too many
	// connections) carries no SQLSTATE, and go-mysql leaves State empty:
	// it goes on as the backend sent it.
	if e.State != "" {
		state := e.State
		if len(state) != 5 {
			state = mysql.DEFAULT_MYSQL_STATE
		}
		b = append(append(b, '#'), state...)
	}
	return append(b, e.Message...)
}

// ParseErr decodes an ERR packet's payload (protocol 4.1); one that is not
// an ERR packet reads as an unknown error saying so.
func ParseErr(payload []byte) *mysql.MyError {
	e := &mysql.MyError{Code: mysql.ER_UNKNOWN_ERROR, State: mysql.DEFAULT_MYSQL_STATE}
	if len(payload) < 3 || payload[0] != MarkErr {
		e.Message = "malformed error packet"
		return e
	}
	e.Code = binary.LittleEndian.Uint16(payload[1:])
	rest := payload[3:]
	if len(rest) >= 6 && rest[0] == '#' {
		e.State = string(rest[1:6])
		rest = rest[6:]
	}
	e.Message = string(rest)
	return e
}

// ColumnNamesEnd is where the six length-encoded names that open a column
// definition (catalog, schema, table, original table, name, original name)
// end in def: where MariaDB's extended metadata goes, when a client
// negotiated it. ok is false for a definition cut short.
func ColumnNamesEnd(def []byte) (end int, ok bool) {
	for i := 0; i < 6; i++ {
		_, n, ok := ReadLenEncString(def[end:])
		if !ok {
			return 0, false
		}
		end += n
	}
	return end, true
}
