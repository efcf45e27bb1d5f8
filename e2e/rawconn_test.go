package e2e

import (
	"encoding/binary"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// rawConn speaks packets on a logged-in connection, for tests that send
// what a driver would not (cursors, malformed executes).
type rawConn struct {
	t *testing.T
	c *client.Conn
}

// send sends one command packet (its payload).
func (r rawConn) send(p []byte) {
	r.c.ResetSequence()
	if err := r.c.WritePacket(append([]byte{0, 0, 0, 0}, p...)); err != nil {
		r.t.Fatal(err)
	}
}

// read reads one packet's payload.
func (r rawConn) read() []byte {
	p, err := r.c.ReadPacket()
	if err != nil {
		r.t.Fatal(err)
	}
	return p
}

// prepare prepares q with COM_STMT_PREPARE and reads the answer (its
// parameter and column definitions), returning the statement's id.
func (r rawConn) prepare(q string) uint32 {
	r.send(append([]byte{mysql.COM_STMT_PREPARE}, q...))
	ok := r.read()
	if ok[0] == mysql.ERR_HEADER {
		r.t.Fatalf("prepare %q: error packet %q", q, ok)
	}
	cols, params := binary.LittleEndian.Uint16(ok[5:]), binary.LittleEndian.Uint16(ok[7:])
	for _, n := range []uint16{params, cols} {
		if n > 0 {
			for i := uint16(0); i < n; i++ {
				r.read()
			}
			r.read() // EOF
		}
	}
	return binary.LittleEndian.Uint32(ok[1:])
}

// untilEOF reads packets up to an EOF packet, handing each other one to
// row (when not nil), and returns the EOF's status. An ERR packet fails
// the test.
func (r rawConn) untilEOF(row func([]byte)) uint16 {
	for {
		p := r.read()
		if p[0] == mysql.EOF_HEADER && len(p) < 9 {
			return binary.LittleEndian.Uint16(p[3:])
		}
		if p[0] == mysql.ERR_HEADER {
			r.t.Fatalf("error packet %q", p)
		}
		if row != nil {
			row(p)
		}
	}
}
