package proxy

import (
	"net"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/packet"
)

// A connection opened before the accounts changed is not taken from the
// pool again.
func TestPoolDropsConnectionsOpenedBeforeAnAccountChange(t *testing.T) {
	bp := newBackendPool(BackendConfig{Addr: "127.0.0.1:1"})
	key := poolKey{user: "u"}
	end, _ := net.Pipe()
	bc := &backendConn{Conn: &client.Conn{Conn: packet.NewConn(end)}, key: key, logins: bp.cfg.Logins.current(), idleSince: time.Now()}
	bp.idle[key] = []*backendConn{bc}
	bp.nIdle = 1
	if got := bp.takeIdle(key); got != bc {
		t.Fatal("a pooled connection was not reused before any change")
	}
	bp.idle[key] = []*backendConn{bc}
	bp.nIdle = 1
	bp.cfg.Logins.Changed()
	if got := bp.takeIdle(key); got != nil {
		t.Fatal("a connection logged in before the change was reused")
	}
}
