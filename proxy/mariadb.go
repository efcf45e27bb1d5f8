package proxy

import (
	"encoding/binary"
	"net"
	"sync"

	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/internal/mysqlwire"
)

// MariaDB extends the capability flags with 32 more bits, carried in the
// last four bytes of the handshake's reserved filler. A server announces them
// by clearing CLIENT_LONG_PASSWORD (which MariaDB calls CLIENT_MYSQL), and a
// client that wants them clears the same bit in its response.
//
// The proxy offers its clients the two that the relay can carry unchanged,
// and only when the backend offers them: extended column metadata (JSON and
// GEOMETRY subtypes in column definitions, which `mariadb --column-type-info`
// shows) and progress reports (sent during long ALTER TABLE or LOAD DATA).
// Whatever a client negotiates of them is asked of the backend connection
// too, so both sides speak the same dialect.
const (
	mariadbProgress         uint32 = 1 << 0 // MARIADB_CLIENT_PROGRESS
	mariadbExtendedMetadata uint32 = 1 << 3 // MARIADB_CLIENT_EXTENDED_METADATA

	relayedMariaDBCaps = mariadbProgress | mariadbExtendedMetadata

	clientMySQL = mysql.CLIENT_LONG_PASSWORD // cleared means "MariaDB extended capabilities"

	// Offsets in a handshake response payload.
	extCapsOffset = 28 // last 4 bytes of the 23-byte filler
)

// greeting is what the proxy learns from a backend's initial handshake.
type greeting struct {
	version string
	extCaps uint32 // MariaDB extended capabilities; 0 for MySQL
}

// parseGreeting decodes a HandshakeV10 payload far enough for greeting.
func parseGreeting(p []byte) (greeting, bool) {
	var g greeting
	if len(p) < 2 || p[0] != 10 {
		return g, false
	}
	v, pos, ok := mysqlwire.ReadNulString(p, 1)
	if !ok {
		return g, false
	}
	g.version = v
	// connection id (4), auth data part 1 (8), filler (1), caps low (2),
	// charset (1), status (2), caps high (2), auth data length (1),
	// reserved (6), MariaDB extended caps (4).
	pos += 4 + 8 + 1
	if pos+2 > len(p) {
		return g, true
	}
	capsLow := binary.LittleEndian.Uint16(p[pos:])
	pos += 2 + 1 + 2 + 2 + 1 + 6
	if capsLow&uint16(clientMySQL) == 0 && pos+4 <= len(p) {
		g.extCaps = binary.LittleEndian.Uint32(p[pos:])
	}
	return g, true
}

// clientExtCaps returns the MariaDB extended capabilities in a handshake
// response payload (0 when the client did not ask for them).
func clientExtCaps(p []byte) uint32 {
	if len(p) < extCapsOffset+4 || binary.LittleEndian.Uint32(p)&clientMySQL != 0 {
		return 0
	}
	return binary.LittleEndian.Uint32(p[extCapsOffset:])
}

// extCapsConn asks the backend for capabilities that go-mysql's client
// does not send: a MariaDB backend's extended capabilities (want: it
// clears CLIENT_MYSQL and fills in the extended flags), and client flags
// it leaves out (add: CLIENT_INTERACTIVE). It rewrites the handshake
// response on its way out, so it sees only plain TCP: a TLS backend
// connection goes without them (and the proxy then does not offer the
// extended ones to clients either).
type extCapsConn struct {
	net.Conn
	want uint32
	add  uint32
	once sync.Once
}

func (c *extCapsConn) Write(b []byte) (int, error) {
	c.once.Do(func() {
		// b is the whole handshake response packet: a 4-byte header with
		// sequence number 1, then the payload.
		if len(b) >= mysqlwire.HeaderLen+extCapsOffset+4 && b[3] == 1 {
			p := b[mysqlwire.HeaderLen:]
			caps := binary.LittleEndian.Uint32(p) | c.add
			if c.want != 0 {
				caps &^= clientMySQL
				binary.LittleEndian.PutUint32(p[extCapsOffset:], c.want)
			}
			binary.LittleEndian.PutUint32(p, caps)
		}
	})
	return c.Conn.Write(b)
}

// isProgressReport reports whether an ERR-marked packet is a MariaDB
// progress report (error code 0xFFFF), which a response may carry any number
// of before its real end.
func isProgressReport(p []byte) bool {
	return len(p) >= 3 && p[0] == mysqlwire.MarkErr && p[1] == 0xff && p[2] == 0xff
}

// appendProgress appends a progress report: the ERR marker, code 0xFFFF,
// then (as MariaDB's server writes it) one string follows, the stage and
// the number of stages, the percent done in thousandths (three bytes), and
// the stage's name.
func appendProgress(b []byte, stage, maxStage int, percent float64, info string) []byte {
	clamp := func(v int) byte { return byte(min(max(v, 1), 255)) }
	p := uint32(min(max(percent, 0), 100) * 1000)
	b = append(b, mysqlwire.MarkErr, 0xff, 0xff, 1, clamp(stage), clamp(max(stage, maxStage)), byte(p), byte(p>>8), byte(p>>16))
	return mysqlwire.AppendLenEncString(b, info)
}

// withEmptyExtendedMetadata inserts an empty extended-metadata field into a
// column definition payload (after its six length-encoded strings), for a
// client that negotiated MARIADB_CLIENT_EXTENDED_METADATA.
func withEmptyExtendedMetadata(def []byte) []byte {
	pos, ok := mysqlwire.ColumnNamesEnd(def)
	if !ok {
		return def
	}
	out := make([]byte, 0, len(def)+1)
	out = append(out, def[:pos]...)
	out = append(out, 0)
	return append(out, def[pos:]...)
}
