package proxy

import (
	"errors"

	"tableproxy/internal/mysqlwire"
)

// Packets in this package are kept as []byte with mysqlwire.HeaderLen bytes
// of room in front for the header that packet.Conn.WritePacket fills in, so
// a packet read from one side can be written to the other without copying
// it again.

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

// maxKeptPacket is the largest buffer a session keeps between commands:
// after a larger packet it lets the buffer go, so that many idle sessions
// do not each hold the largest statement they sent.
const maxKeptPacket = 64 << 10

// shrink lets a buffer larger than maxKeptPacket go, once the command it
// held has been answered.
func (p *packetBuffer) shrink() {
	if cap(p.b) > maxKeptPacket {
		p.b = nil
	}
}

func (p *packetBuffer) reset(limit int) {
	p.shrink()
	if p.b == nil {
		p.b = make([]byte, mysqlwire.HeaderLen, 16<<10)
	}
	p.b = p.b[:mysqlwire.HeaderLen]
	p.limit = limit
	p.overflow = false
}

func (p *packetBuffer) Write(b []byte) (int, error) {
	if p.limit > 0 && len(p.b)-mysqlwire.HeaderLen+len(b) > p.limit {
		p.overflow = true
		return 0, errPacketTooLarge
	}
	p.b = append(p.b, b...)
	return len(b), nil
}

// payload is the packet without its header room.
func (p *packetBuffer) payload() []byte { return p.b[mysqlwire.HeaderLen:] }

var errPacketTooLarge = errors.New("packet larger than max_allowed_packet")

// newPacket returns a fresh buffer with header room, for packets the proxy
// composes itself.
func newPacket(sizeHint int) []byte {
	return make([]byte, mysqlwire.HeaderLen, mysqlwire.HeaderLen+sizeHint)
}
