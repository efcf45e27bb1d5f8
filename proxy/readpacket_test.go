package proxy

import (
	"bytes"
	"math/rand"
	"net"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/packet"
)

// TestReadPacket feeds the command-phase reader packets in pieces of every
// size, from one byte to many packets at once: small ones, one that fills a
// protocol packet exactly (and so is followed by an empty part), one of
// more than 16 MB, and then a packet over the limit, a wrong sequence
// number and a connection that ends mid-packet.
func TestReadPacket(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	payload := func(n int) []byte {
		p := make([]byte, n)
		rng.Read(p)
		return p
	}
	// frame splits p into protocol packets starting at sequence seq.
	frame := func(p []byte, seq byte) []byte {
		var b []byte
		for {
			n := min(len(p), mysql.MaxPayloadLen)
			b = append(b, byte(n), byte(n>>8), byte(n>>16), seq)
			b = append(b, p[:n]...)
			seq++
			p = p[n:]
			if n < mysql.MaxPayloadLen {
				return b
			}
		}
	}
	want := [][]byte{{3}, payload(1), payload(200), {}, payload(mysql.MaxPayloadLen), payload(20 << 20), payload(5000)}
	var stream []byte
	for _, p := range want {
		stream = append(stream, frame(p, 0)...)
	}
	c, feed := pipeReader(t)
	go func() {
		// Byte by byte for the first small packets, then random pieces.
		for i := 0; i < 40 && len(stream) > 0; i++ {
			feed.Write(stream[:1])
			stream = stream[1:]
		}
		for len(stream) > 0 {
			n := min(len(stream), 1+rng.Intn(100<<10))
			feed.Write(stream[:n])
			stream = stream[n:]
		}
	}()
	var dst packetBuffer
	for i, w := range want {
		c.pc.Sequence = 0
		dst.reset(0)
		if err := c.readPacket(&dst); err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		if !bytes.Equal(dst.payload(), w) {
			t.Fatalf("packet %d: got %d bytes, want %d, or different bytes", i, len(dst.payload()), len(w))
		}
	}

	// Over the limit: overflow is set, and no more than the limit was kept.
	c, feed = pipeReader(t)
	go feed.Write(frame(payload(10000), 0))
	dst.reset(4096)
	if err := c.readPacket(&dst); err == nil || !dst.overflow || len(dst.payload()) > 4096 {
		t.Fatalf("over the limit: err %v, overflow %v, %d bytes kept", err, dst.overflow, len(dst.payload()))
	}

	// A sequence number out of order.
	c, feed = pipeReader(t)
	go feed.Write(frame([]byte{3, 'x'}, 2))
	dst.reset(0)
	if err := c.readPacket(&dst); err == nil || !strings.Contains(err.Error(), "invalid sequence") {
		t.Fatalf("wrong sequence: %v", err)
	}

	// A continuation part out of order (the first part is 0, so the next
	// must be 1).
	c, feed = pipeReader(t)
	go func() {
		b := frame(payload(mysql.MaxPayloadLen), 0)
		b[len(b)-1] = 7 // the empty last part's sequence number
		feed.Write(b)
	}()
	dst.reset(0)
	if err := c.readPacket(&dst); err == nil || !strings.Contains(err.Error(), "invalid sequence 7 != 1") {
		t.Fatalf("wrong sequence on a continuation: %v", err)
	}

	// The client goes away in the middle of a packet.
	c, feed = pipeReader(t)
	go func() {
		feed.Write(frame(payload(100), 0)[:50])
		feed.Close()
	}()
	dst.reset(0)
	if err := c.readPacket(&dst); err == nil {
		t.Fatal("a cut packet was read without an error")
	}
}

// pipeReader is a command-phase clientConn reading from one end of a pipe;
// the other end is returned for the test to write to.
func pipeReader(t *testing.T) (*clientConn, net.Conn) {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	c := &clientConn{raw: a, buf: newBufferedConn(a)}
	c.pc = packet.NewTLSConn(c.buf)
	c.startCommandPhase()
	return c, b
}
