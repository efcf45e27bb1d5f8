package proxy

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// Connector opens backend connections for the proxy's own work (plugins
// loading tables, checking schemas), as a configured user with that user's
// password, so the backend's grants apply to that work too.
type Connector struct {
	backend BackendConfig
	users   *Users
}

// AccountsChanged tells the proxy that the backend's accounts changed (a
// GRANT, a password, a lock), as a plugin learned it: sessions that start
// from now on log in afresh (see Logins).
func (c *Connector) AccountsChanged() { c.backend.Logins.Changed() }

// NewConnector returns a Connector for the backend and users of cfg.
func NewConnector(cfg Config) *Connector {
	b := cfg.Backend
	if b.ConnectTimeout <= 0 {
		b.ConnectTimeout = 5 * time.Second
	}
	users := cfg.Accounts
	if users == nil {
		users = NewUsers(cfg.Users)
	}
	return &Connector{backend: b, users: users}
}

// Connect opens a connection as user, in database db (may be empty).
func (c *Connector) Connect(ctx context.Context, user, db string) (*client.Conn, error) {
	u, ok := c.users.Get(user)
	if !ok {
		return nil, fmt.Errorf("no configured user %q", user)
	}
	ctx, cancel := context.WithTimeout(ctx, c.backend.ConnectTimeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	network, addr := backendNetwork(c.backend.Addr)
	dialer := func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			_ = conn.SetDeadline(deadline)
		}
		return conn, err
	}
	conn, err := client.ConnectWithDialer(ctx, network, addr, u.Name, u.Password, db, dialer, func(cc *client.Conn) error {
		if c.backend.TLS != nil {
			cc.SetTLSConfig(c.backend.TLS)
		}
		return cc.SetCollation("utf8mb4_general_ci")
	})
	if err != nil {
		return nil, err
	}
	_ = conn.Conn.SetDeadline(time.Time{})
	return conn, nil
}

// Binlog returns a binary-log syncer logged in as user. The caller's cfg
// supplies the server id and event handling; the connector fills in where
// and how to connect, and the flavor, which it decides by asking the
// backend (MariaDB says so in its version), not by guessing.
func (c *Connector) Binlog(user string, cfg replication.BinlogSyncerConfig) (*replication.BinlogSyncer, error) {
	u, ok := c.users.Get(user)
	if !ok {
		return nil, fmt.Errorf("no configured user %q", user)
	}
	network, addr := backendNetwork(c.backend.Addr)
	if network != "tcp" {
		return nil, fmt.Errorf("the binary log is read over TCP; backend address %q is not host:port", c.backend.Addr)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("backend port %q: %w", port, err)
	}
	g, err := probeGreeting(c.backend.Addr, c.backend.ConnectTimeout)
	if err != nil {
		return nil, err
	}
	cfg.Flavor = mysql.MySQLFlavor
	if strings.Contains(g.version, "MariaDB") {
		cfg.Flavor = mysql.MariaDBFlavor
		// Each statement's text before its row events (Annotate_rows, if
		// the backend logs it: binlog_annotate_row_events, on by
		// default): the cache tells by it whether a write came from a
		// statement this proxy sent.
		cfg.DumpCommandFlag |= replication.BINLOG_SEND_ANNOTATE_ROWS_EVENT
	}
	cfg.Host, cfg.Port, cfg.User, cfg.Password = host, uint16(p), u.Name, u.Password
	cfg.TLSConfig = c.backend.TLS
	return replication.NewBinlogSyncer(cfg), nil
}
