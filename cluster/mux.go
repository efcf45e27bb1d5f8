package cluster

import (
	"bufio"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// One TCP address (--raft-listen) carries both Raft's RPCs and the
// cluster's small HTTP API (join, propose, revoke), so a node needs one
// port and --join takes any member's Raft address. hashicorp/raft's
// network transport opens every connection by writing a one-byte RPC
// type (0 to 3); an HTTP request starts with an ASCII method name. The
// first byte decides who gets the connection.

type muxListener struct {
	ln    net.Listener
	raftC chan net.Conn
	httpC chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newMux(ln net.Listener) *muxListener {
	m := &muxListener{ln: ln, raftC: make(chan net.Conn), httpC: make(chan net.Conn), done: make(chan struct{})}
	go m.serve()
	return m
}

// serve accepts until the node closes the mux. It never gives the address
// up on its own: the leader takes a refused connection to mean that the
// proxy is gone and serves nothing (see lease.Raft.RevokeOthers), so only Node.Close,
// which runs after the proxy stopped serving, may close the listener.
func (m *muxListener) serve() {
	backoff := 5 * time.Millisecond
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.done:
				return
			case <-time.After(backoff):
			}
			if backoff < time.Second {
				backoff *= 2
			}
			continue
		}
		backoff = 5 * time.Millisecond
		go m.route(c)
	}
}

func (m *muxListener) route(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	b, err := br.Peek(1)
	if err != nil {
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	pc := &peekedConn{Conn: c, r: br}
	to := m.raftC
	if b[0] >= 'A' && b[0] <= 'Z' {
		to = m.httpC
	}
	select {
	case to <- pc:
	case <-m.done:
		c.Close()
	}
}

func (m *muxListener) close() {
	m.once.Do(func() {
		close(m.done)
		m.ln.Close()
	})
}

// peekedConn is a connection whose first bytes were read into r.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// subListener is one side of the mux, as a net.Listener.
type subListener struct {
	m *muxListener
	c chan net.Conn
}

func (s subListener) Accept() (net.Conn, error) {
	select {
	case c := <-s.c:
		return c, nil
	case <-s.m.done:
		return nil, net.ErrClosed
	}
}

func (s subListener) Close() error   { s.m.close(); return nil }
func (s subListener) Addr() net.Addr { return s.m.ln.Addr() }

// streamLayer is the Raft side: raft.StreamLayer over the mux.
type streamLayer struct {
	subListener
	advertise net.Addr
	tls       *tls.Config // the members' mutual TLS, nil for plain TCP
}

func (s streamLayer) Addr() net.Addr { return s.advertise }

func (s streamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if s.tls != nil {
		return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(addr), s.tls)
	}
	return net.DialTimeout("tcp", string(addr), timeout)
}

var errClosed = errors.New("cluster: node closed")
