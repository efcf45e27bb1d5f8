package proxy

import (
	"encoding/binary"
	"errors"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// Packets in this package are kept as []byte with 4 bytes of room in front
// for the header that packet.Conn.WritePacket fills in, so a packet read from
// one side can be written to the other without copying it again.
const headerLen = 4

// packetBuffer is an io.Writer that clientConn.readPacket (or
// packet.Conn.ReadPacketTo) fills with one (possibly multi-part) packet. It
// is reused across packets to avoid allocating per packet, and refuses to
// grow past limit so that a client cannot make the proxy buffer more than
// max_allowed_packet.
type packetBuffer struct {
	b        []byte
	limit    int // payload bytes allowed; 0 = no limit
	overflow bool
}

func (p *packetBuffer) reset(limit int) {
	if cap(p.b) > 4<<20 {
		// Do not keep a huge buffer alive for the life of a session after a
		// one-off large packet.
		p.b = nil
	}
	if p.b == nil {
		p.b = make([]byte, headerLen, 16<<10)
	}
	p.b = p.b[:headerLen]
	p.limit = limit
	p.overflow = false
}

func (p *packetBuffer) Write(b []byte) (int, error) {
	if p.limit > 0 && len(p.b)-headerLen+len(b) > p.limit {
		p.overflow = true
		return 0, errPacketTooLarge
	}
	p.b = append(p.b, b...)
	return len(b), nil
}

// payload is the packet without its header room.
func (p *packetBuffer) payload() []byte { return p.b[headerLen:] }

var errPacketTooLarge = errors.New("packet larger than max_allowed_packet")

// Response packet markers.
const (
	markOK         = 0x00
	markEOF        = 0xfe
	markErr        = 0xff
	markLocalInfil = 0xfb
)

// isEOF reports whether payload is an EOF packet (and not a row that starts
// with a 0xfe length prefix, which is always at least 9 bytes long).
func isEOF(payload []byte) bool {
	return len(payload) > 0 && payload[0] == markEOF && len(payload) < 9
}

// okInfo is what the proxy reads out of an OK packet.
type okInfo struct {
	affectedRows uint64
	lastInsertID uint64
	status       uint16
	warnings     uint16
}

func parseOK(payload []byte) (okInfo, bool) {
	var ok okInfo
	if len(payload) < 1 || payload[0] != markOK {
		return ok, false
	}
	pos := 1
	var n int
	var valid bool
	if ok.affectedRows, n, valid = readLenEnc(payload[pos:]); !valid {
		return ok, false
	}
	pos += n
	if ok.lastInsertID, n, valid = readLenEnc(payload[pos:]); !valid {
		return ok, false
	}
	pos += n
	if pos+4 > len(payload) {
		return ok, false
	}
	ok.status = binary.LittleEndian.Uint16(payload[pos:])
	ok.warnings = binary.LittleEndian.Uint16(payload[pos+2:])
	return ok, true
}

// parseEOF returns the warnings and status flags of an EOF packet.
func parseEOF(payload []byte) (warnings, status uint16) {
	if len(payload) >= 5 {
		warnings = binary.LittleEndian.Uint16(payload[1:])
		status = binary.LittleEndian.Uint16(payload[3:])
	}
	return
}

// parseErr decodes an ERR packet (protocol 4.1) into a MyError.
func parseErr(payload []byte) *mysql.MyError {
	e := &mysql.MyError{Code: mysql.ER_UNKNOWN_ERROR, State: mysql.DEFAULT_MYSQL_STATE}
	if len(payload) < 3 || payload[0] != markErr {
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

// appendErr appends an ERR packet payload.
func appendErr(b []byte, e *mysql.MyError) []byte {
	b = append(b, markErr, byte(e.Code), byte(e.Code>>8))
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

// appendOK appends an OK packet payload.
func appendOK(b []byte, affected, insertID uint64, status, warnings uint16) []byte {
	b = append(b, markOK)
	b = mysql.AppendLengthEncodedInteger(b, affected)
	b = mysql.AppendLengthEncodedInteger(b, insertID)
	return append(b, byte(status), byte(status>>8), byte(warnings), byte(warnings>>8))
}

// appendEOF appends an EOF packet payload.
func appendEOF(b []byte, warnings, status uint16) []byte {
	return append(b, markEOF, byte(warnings), byte(warnings>>8), byte(status), byte(status>>8))
}

// newPacket returns a fresh buffer with header room, for packets the proxy
// composes itself.
func newPacket(sizeHint int) []byte {
	return make([]byte, headerLen, headerLen+sizeHint)
}

// readNulString reads a NUL-terminated string at pos.
func readNulString(b []byte, pos int) (string, int, bool) {
	for i := pos; i < len(b); i++ {
		if b[i] == 0 {
			return string(b[pos:i]), i + 1, true
		}
	}
	return "", pos, false
}

// readLenEnc reads a length-encoded integer. Unlike go-mysql's helper it
// never reads past b: a truncated value reports ok=false. A NULL marker
// (0xfb) is also ok=false, since no caller here expects one.
func readLenEnc(b []byte) (v uint64, n int, ok bool) {
	if len(b) == 0 {
		return 0, 0, false
	}
	switch b[0] {
	case 0xfb, 0xff:
		return 0, 0, false
	case 0xfc:
		n = 3
	case 0xfd:
		n = 4
	case 0xfe:
		n = 9
	default:
		return uint64(b[0]), 1, true
	}
	if len(b) < n {
		return 0, 0, false
	}
	for i := n - 1; i >= 1; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v, n, true
}

// readLenEncString reads a length-encoded string without reading past b.
func readLenEncString(b []byte) (s []byte, n int, ok bool) {
	l, w, ok := readLenEnc(b)
	if !ok || uint64(len(b)-w) < l {
		return nil, 0, false
	}
	return b[w : w+int(l)], w + int(l), true
}
