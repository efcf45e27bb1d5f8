package proxy

import (
	"bufio"
	"net"
)

// bufferedConn batches the client-bound writes of one response into a single
// write syscall. go-mysql's packet.Conn writes every packet straight to the
// socket; a one-row result is five packets, and on a 2-core machine shared
// with the backend those syscalls dominate a point select. The session
// flushes at the end of every response, and a read flushes first so that a
// handshake exchange can never wait on unsent bytes.
type bufferedConn struct {
	net.Conn
	w *bufio.Writer
}

func newBufferedConn(c net.Conn) *bufferedConn {
	return &bufferedConn{Conn: c, w: bufio.NewWriterSize(c, 32<<10)}
}

func (c *bufferedConn) Write(p []byte) (int, error) { return c.w.Write(p) }

func (c *bufferedConn) Read(p []byte) (int, error) {
	if c.w.Buffered() > 0 {
		if err := c.w.Flush(); err != nil {
			return 0, err
		}
	}
	return c.Conn.Read(p)
}

// Flush writes whatever is buffered.
func (c *bufferedConn) Flush() error { return c.w.Flush() }
