package proxy

import (
	"net"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/packet"

	"tableproxy/internal/mysqlwire"
)

// pooledPipe pools a connection whose backend end the test holds, with its
// watcher running, as resetAndPool leaves it.
func pooledPipe(t *testing.T, bp *backendPool, key poolKey) (*backendConn, net.Conn) {
	t.Helper()
	ours, backend := net.Pipe()
	t.Cleanup(func() { ours.Close(); backend.Close() })
	bc := &backendConn{Conn: &client.Conn{Conn: packet.NewConn(ours)}, key: key,
		logins: bp.cfg.Logins.current(), idleSince: time.Now(), watched: make(chan bool, 1)}
	bp.mu.Lock()
	bp.idle[key] = append(bp.idle[key], bc)
	bp.nIdle++
	bp.mu.Unlock()
	go bp.watchPooled(bc)
	return bc, backend
}

// A pooled connection that the backend closes leaves the pool at once; one
// that stays open is handed out, its watcher stopped.
func TestPoolDropsConnectionsTheBackendCloses(t *testing.T) {
	bp := newBackendPool(BackendConfig{Addr: "127.0.0.1:1"})
	key := poolKey{user: "u"}
	kept, _ := pooledPipe(t, bp, key)
	_, closing := pooledPipe(t, bp, key)
	closing.Close()
	deadline := time.Now().Add(2 * time.Second)
	for {
		bp.mu.Lock()
		n := bp.nIdle
		bp.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pooled connections, want 1: the closed one is still pooled", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	bc := bp.takeIdle(key)
	if bc != kept || !bp.unwatch(bc) {
		t.Fatal("the open connection was not handed out")
	}
}

// The last words of a backend that ends an idle connection: its ERR packet
// is kept whole, a plain close says nothing, and a deadline is a disarm.
func TestReadLastWords(t *testing.T) {
	errPacket := []byte{9, 0, 0, 0, mysqlwire.MarkErr, 0xbf, 0x0f, 'g', 'o', 'o', 'd', 'b', 'y'}
	for _, tc := range []struct {
		name      string
		peer      func(net.Conn)
		lost      bool
		finalSize int
	}{
		{"err then close", func(c net.Conn) { c.Write(errPacket[:5]); c.Write(errPacket[5:]); c.Close() }, true, len(errPacket)},
		{"close", func(c net.Conn) { c.Close() }, true, 0},
		{"silence", func(net.Conn) {}, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ours, peer := net.Pipe()
			defer ours.Close()
			defer peer.Close()
			_ = ours.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			go tc.peer(peer)
			lost, final, _ := readLastWords(ours)
			if lost != tc.lost || len(final) != tc.finalSize {
				t.Errorf("lost %v with %d bytes, want %v with %d", lost, len(final), tc.lost, tc.finalSize)
			}
		})
	}
}
