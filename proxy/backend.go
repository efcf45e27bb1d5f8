package proxy

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser/charset"

	"tableproxy/internal/mysqlwire"
)

// BackendConfig says how to reach the backend.
type BackendConfig struct {
	Addr           string        // host:port
	TLS            *tls.Config   // nil: plain TCP
	ConnectTimeout time.Duration // dial plus handshake; 0 means 5s
	MaxIdle        int           // pooled idle connections kept in all; 0 means 64, <0 disables pooling
	IdleTimeout    time.Duration // an idle pooled connection older than this is closed; 0 means 60s
	// Logins, shared with the Connector, tells the pool that the backend's
	// accounts changed (nil: the pool keeps its own, told only by the
	// proxy's sessions).
	Logins *Logins
}

// Logins counts changes of the backend's accounts: grants, passwords,
// locks, roles. A login is checked once, when a connection is opened, and
// MariaDB keeps a connection's database rights from then on, so a
// connection pooled before a change is not given to a new session, which
// logs in afresh, as it would directly.
type Logins struct{ epoch atomic.Uint64 }

// Changed records a change of the backend's accounts.
func (l *Logins) Changed() {
	if l != nil {
		l.epoch.Add(1)
	}
}

func (l *Logins) current() uint64 {
	if l == nil {
		return 0
	}
	return l.epoch.Load()
}

// backendParams is everything that decides how a backend connection is
// opened, so two sessions with equal params can share a pooled connection.
type backendParams struct {
	user      string
	password  string
	db        string
	collation uint8
	caps      uint32 // the client's negotiated caps that are mirrored
	extCaps   uint32 // the client's negotiated MariaDB extended caps
	attrs     map[string]string
}

type poolKey struct {
	user      string
	pwHash    [32]byte
	db        string
	collation uint8
	caps      uint32
	extCaps   uint32
}

func (p *backendParams) key() poolKey {
	return poolKey{user: p.user, pwHash: sha256.Sum256([]byte(p.password)), db: p.db, collation: p.collation, caps: p.caps & mirroredCaps, extCaps: p.extCaps}
}

// backendConn is one connection to the backend, bound to one session at a
// time.
type backendConn struct {
	*client.Conn
	key       poolKey
	threadID  uint32      // the backend's id for this connection (for KILL)
	maxPacket int         // the backend's max_allowed_packet
	charset   connCharset // what the backend chose for the handshake's collation
	idleSince time.Time
	logins    uint64 // Logins' count when it was opened
	// roles: the backend has roles (MariaDB, MySQL 8); role is the
	// CURRENT_ROLE() the login gave the connection (the account's default
	// role), which a session's SET ROLE changes and a reset keeps
	// (MariaDB 10.11), so pooling restores it.
	roles bool
	role  sql.NullString
	// charsetDrift: a reset leaves this connection another character set
	// than its login's (see restoreOpened), so each reset is followed by a
	// restore.
	charsetDrift bool
	// watched reports, once per pooling, whether the pool's watcher found
	// the connection closed by the backend (see watchPooled).
	watched chan bool
}

// backendPool opens backend connections and keeps clean idle ones for reuse.
type backendPool struct {
	cfg BackendConfig

	mu       sync.Mutex // guards idle, nIdle, greeting, closed; held only briefly
	idle     map[poolKey][]*backendConn
	nIdle    int
	greeting greeting // from the backend's newest greeting
	closed   bool     // after closeIdle, at shutdown: nothing more is pooled
}

func newBackendPool(cfg BackendConfig) *backendPool {
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	if cfg.MaxIdle == 0 {
		cfg.MaxIdle = 64
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 60 * time.Second
	}
	if cfg.Logins == nil {
		cfg.Logins = &Logins{}
	}
	return &backendPool{cfg: cfg, idle: map[poolKey][]*backendConn{}}
}

// lastGreeting returns what the backend's newest greeting said.
func (bp *backendPool) lastGreeting() greeting {
	bp.mu.Lock()
	defer bp.mu.Unlock()
	return bp.greeting
}

// get returns a connection for params: a pooled one that still answers a
// ping, or a new one.
func (bp *backendPool) get(ctx context.Context, params *backendParams) (*backendConn, error) {
	key := params.key()
	for {
		bc := bp.takeIdle(key)
		if bc == nil {
			break
		}
		if !bp.unwatch(bc) {
			bc.Conn.Close()
			continue
		}
		timedOut, err := bp.freshen(bc)
		if err == nil {
			return bc, nil
		}
		bc.Conn.Close()
		if timedOut {
			// The backend holds the connection but does not answer: the
			// next pooled one, or a new one, would wait as long.
			return nil, &backendDownError{addr: bp.cfg.Addr, err: err}
		}
	}
	return bp.dial(ctx, params, key)
}

// freshen makes a pooled connection, as it is handed out, what a fresh
// login would be now: COM_RESET_CONNECTION gives its session variables
// the global values in force now (a reset when it was pooled gave it those
// of then), and is the check that it still answers, within the connect
// timeout: a backend that keeps its connections but never answers
// (stopped, or its host hung) must not hold a new session, nor the
// shutdown that waits for the session, for ever. timedOut says the
// deadline passed (go-mysql's error keeps only the words of the cause).
// The role and database were restored when it was pooled.
func (bp *backendPool) freshen(bc *backendConn) (timedOut bool, err error) {
	deadline := time.Now().Add(bp.cfg.ConnectTimeout)
	_ = bc.Conn.Conn.SetDeadline(deadline)
	err = resetConnection(bc)
	if err == nil && bc.charsetDrift {
		err = restoreOpened(bc)
	}
	if err == nil && bc.key.caps&mysql.CLIENT_INTERACTIVE != 0 {
		// The reset gives wait_timeout the global wait_timeout; a login
		// with CLIENT_INTERACTIVE has interactive_timeout there.
		_, err = bc.Execute("SET @@session.wait_timeout = @@global.interactive_timeout")
	}
	_ = bc.Conn.Conn.SetDeadline(time.Time{})
	return err != nil && !time.Now().Before(deadline), err
}

func (bp *backendPool) takeIdle(key poolKey) *backendConn {
	bp.mu.Lock()
	defer bp.mu.Unlock()
	for {
		list := bp.idle[key]
		if len(list) == 0 {
			return nil
		}
		bc := list[len(list)-1]
		bp.idle[key] = list[:len(list)-1]
		bp.nIdle--
		if bp.stale(bc, time.Now()) {
			go bc.Conn.Close()
			continue
		}
		return bc
	}
}

func (bp *backendPool) dial(ctx context.Context, params *backendParams, key poolKey) (*backendConn, error) {
	if bp.lastGreeting().version == "" {
		// Not seen at start (the backend was down): learn its capabilities
		// now, for the clients that connect from here on.
		if g, err := probeGreeting(bp.cfg.Addr, bp.cfg.ConnectTimeout); err == nil {
			bp.mu.Lock()
			bp.greeting = g
			bp.mu.Unlock()
		}
	}
	ctx, cancel := context.WithTimeout(ctx, bp.cfg.ConnectTimeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	dialer := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		// go-mysql's handshake has no timeout of its own; a backend that
		// accepts but never answers (stopped, overloaded) must not hang us.
		_ = c.SetDeadline(deadline)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		c = newRawSocket(c)
		if add := params.caps & mysql.CLIENT_INTERACTIVE; (params.extCaps != 0 || add != 0) && bp.cfg.TLS == nil {
			return &extCapsConn{Conn: c, want: params.extCaps, add: add}, nil
		}
		return c, nil
	}
	opts := []client.Option{func(c *client.Conn) error {
		c.SetCapability(params.caps & mirroredCaps)
		// Query attributes change the COM_QUERY and COM_STMT_EXECUTE layout;
		// clients never negotiate them with the proxy, so the backend must
		// not expect them either (MySQL 8 offers them, MariaDB does not).
		c.UnsetCapability(mysql.CLIENT_QUERY_ATTRIBUTES)
		if name := collationName(params.collation); name != "" {
			if err := c.SetCollation(name); err != nil {
				return err
			}
		}
		if bp.cfg.TLS != nil {
			c.SetTLSConfig(bp.cfg.TLS)
		}
		attrs := map[string]string{"_client_name": "tableproxy"}
		for k, v := range params.attrs {
			if k == "program_name" || k == "_client_name" {
				attrs["client_"+k] = v
			}
		}
		c.SetAttributes(attrs)
		return nil
	}}
	network, addr := backendNetwork(bp.cfg.Addr)
	logins := bp.cfg.Logins.current() // before the login: a change during it is not missed
	c, err := client.ConnectWithDialer(ctx, network, addr, params.user, params.password, params.db, dialer, opts...)
	if err != nil {
		var me *mysql.MyError
		if errors.As(err, &me) {
			return nil, me
		}
		return nil, &backendDownError{addr: bp.cfg.Addr, err: err}
	}
	bc := &backendConn{Conn: c, key: key, threadID: c.GetConnectionID(), maxPacket: 64 << 20, logins: logins, watched: make(chan bool, 1),
		roles: hasRoles(c.GetServerVersion())}
	if r, err := c.Execute("SELECT @@max_allowed_packet, " + charsetVars + bc.roleColumn()); err == nil {
		if v, err := r.GetInt(0, 0); err == nil && v > 0 {
			bc.maxPacket = int(v)
		}
		bc.charset = readCharset(r, 1)
		bc.role = readRole(r, 5, bc.roles)
	} else {
		c.Close()
		return nil, &backendDownError{addr: bp.cfg.Addr, err: err}
	}
	_ = c.Conn.SetDeadline(time.Time{})
	bp.mu.Lock()
	bp.greeting.version = c.GetServerVersion()
	bp.mu.Unlock()
	return bc, nil
}

// release takes a connection back from a session. A clean connection (no
// response pending) is reset and pooled in the background; anything else is
// closed.
func (bp *backendPool) release(bc *backendConn, clean bool) {
	if bc == nil {
		return
	}
	if !clean || bp.cfg.MaxIdle < 0 {
		bc.Conn.Close()
		return
	}
	go bp.resetAndPool(bc)
}

// resetAndPool clears every piece of session state (user variables,
// temporary tables, prepared statements, open transaction, session
// variables) with COM_RESET_CONNECTION, checks the connection is as it was
// opened (see restoreOpened), and pools it.
func (bp *backendPool) resetAndPool(bc *backendConn) {
	_ = bc.Conn.Conn.SetDeadline(time.Now().Add(bp.cfg.ConnectTimeout))
	ok := resetConnection(bc) == nil && restoreOpened(bc) == nil
	_ = bc.Conn.Conn.SetDeadline(time.Time{})
	if !ok {
		bc.Conn.Close()
		return
	}
	bc.idleSince = time.Now()
	bp.mu.Lock()
	if bp.closed || bp.nIdle >= bp.cfg.MaxIdle {
		bp.mu.Unlock()
		bc.Conn.Close()
		return
	}
	bp.idle[bc.key] = append(bp.idle[bc.key], bc)
	bp.nIdle++
	bp.mu.Unlock()
	go bp.watchPooled(bc)
}

// watchPooled waits on a pooled connection for the backend to close it
// (wait_timeout, KILL, a restart), and then drops it from the pool at
// once: it holds no backend thread, and the count of idle connections
// stays true. Like a session's idle watcher (see lifetime.go) it waits in
// the runtime's netpoller; the session that takes the connection stops it
// with a read deadline (unwatch), once per connect, not per statement.
func (bp *backendPool) watchPooled(bc *backendConn) {
	lost, _, _ := readLastWords(bc.Conn.Conn)
	if lost && bp.drop(bc) {
		bc.Conn.Close()
	}
	bc.watched <- lost
}

// unwatch stops the watcher of a connection just taken from the pool and
// says whether the connection is still open.
func (bp *backendPool) unwatch(bc *backendConn) bool {
	_ = bc.Conn.Conn.SetReadDeadline(time.Now())
	lost := <-bc.watched
	_ = bc.Conn.Conn.SetReadDeadline(time.Time{})
	return !lost
}

// drop takes bc out of the pool, if it is there still.
func (bp *backendPool) drop(bc *backendConn) bool {
	bp.mu.Lock()
	defer bp.mu.Unlock()
	list := bp.idle[bc.key]
	for i, c := range list {
		if c == bc {
			list = append(list[:i], list[i+1:]...)
			list = list[:len(list):len(list)]
			if len(list) == 0 {
				delete(bp.idle, bc.key)
			} else {
				bp.idle[bc.key] = list
			}
			bp.nIdle--
			return true
		}
	}
	return false
}

// restoreOpened checks that a connection just reset is in the database it
// was opened with, and gives it back the character set the backend chose
// for it then, so that the next session starts as on a fresh connection.
// The reset does not always do that: it restores the character set of the
// handshake's collation, and when the backend did not know that collation
// (MariaDB 10.11 does not know 255, utf8mb4_0900_ai_ci, which MySQL 8
// clients send) and fell back to its defaults, it restores a stale one
// instead. The check is part of pooling, not of a session's start.
func restoreOpened(bc *backendConn) error {
	r, err := bc.Execute("SELECT DATABASE(), " + charsetVars + bc.roleColumn())
	if err != nil {
		return err
	}
	db, _ := r.GetString(0, 0)
	cs := readCharset(r, 1)
	if db != bc.key.db {
		return fmt.Errorf("reset left database %q, want %q", db, bc.key.db)
	}
	if role := readRole(r, 5, bc.roles); role != bc.role {
		// A session's SET ROLE outlives the reset: the next session gets
		// the role a login gives, as a direct client would.
		if _, err := bc.Execute(setRoleStatement(bc.role, bc.GetServerVersion())); err != nil {
			return err
		}
	}
	if cs == bc.charset {
		return nil
	}
	bc.charsetDrift = true
	if _, err := bc.Execute(bc.charset.restoreStatement()); err != nil {
		return err
	}
	r, err = bc.Execute("SELECT " + charsetVars)
	if err != nil {
		return err
	}
	cs = readCharset(r, 0)
	if cs != bc.charset {
		return fmt.Errorf("character set %+v after restoring %+v", cs, bc.charset)
	}
	return nil
}

// hasRoles says whether a server of this version has roles (and
// CURRENT_ROLE()): MariaDB, and MySQL from 8.0.
func hasRoles(version string) bool {
	if strings.Contains(version, "MariaDB") {
		return true
	}
	major, _, _ := strings.Cut(version, ".")
	n, err := strconv.Atoi(major)
	return err == nil && n >= 8
}

// roleColumn is the select-list item that reads the current role, if the
// backend has roles.
func (bc *backendConn) roleColumn() string {
	if !bc.roles {
		return ""
	}
	return ", CURRENT_ROLE()"
}

// readRole reads the role column at col (NULL or NONE: no role).
func readRole(r *mysql.Result, col int, roles bool) sql.NullString {
	if !roles {
		return sql.NullString{}
	}
	if null, _ := r.IsNull(0, col); null {
		return sql.NullString{}
	}
	s, _ := r.GetString(0, col)
	if s == "NONE" {
		return sql.NullString{}
	}
	return sql.NullString{String: strings.Clone(s), Valid: true}
}

// setRoleStatement gives a connection back the role role (none when not
// Valid). MariaDB names one role; MySQL's CURRENT_ROLE() lists the active
// ones as `r`@`h`, and SET ROLE DEFAULT restores what a login activates.
func setRoleStatement(role sql.NullString, version string) string {
	switch {
	case !strings.Contains(version, "MariaDB"):
		return "SET ROLE DEFAULT"
	case !role.Valid:
		return "SET ROLE NONE"
	}
	return "SET ROLE " + mysqlwire.QuoteIdent(role.String)
}

// charsetVars are the variables that make up a connection's character set.
const charsetVars = "@@character_set_client, @@character_set_connection, @@character_set_results, @@collation_connection"

// connCharset is a connection's character set, as charsetVars reads it.
// results is empty when character_set_results is NULL (results are sent
// unconverted).
type connCharset struct {
	client, connection, results, collation string
}

// readCharset reads charsetVars from r's first row, from column col on.
// The results here are not Closed: go-mysql's pool would hand their
// Resultset, old column definitions and all, to the next
// mysql.BuildSimpleResultset in the process, which keeps them (the
// product's plugins build theirs with plugins.TextResultset instead).
func readCharset(r *mysql.Result, col int) connCharset {
	var cs connCharset
	for i, v := range []*string{&cs.client, &cs.connection, &cs.results, &cs.collation} {
		s, _ := r.GetString(0, col+i)
		*v = strings.Clone(s) // go-mysql's string points into a pooled buffer
	}
	return cs
}

// restoreStatement is the SET that gives a connection cs. Setting
// collation_connection sets character_set_connection with it.
func (cs connCharset) restoreStatement() string {
	results := "NULL"
	if cs.results != "" {
		results = mysqlwire.QuoteString(cs.results)
	}
	return "SET character_set_client = " + mysqlwire.QuoteString(cs.client) +
		", collation_connection = " + mysqlwire.QuoteString(cs.collation) +
		", character_set_results = " + results
}

func resetConnection(bc *backendConn) error {
	bc.ResetSequence()
	if err := bc.WritePacket([]byte{0, 0, 0, 0, mysql.COM_RESET_CONNECTION}); err != nil {
		return err
	}
	p, err := bc.ReadPacket()
	if err != nil {
		return err
	}
	if len(p) == 0 || p[0] != mysqlwire.MarkOK {
		return mysqlwire.ParseErr(p)
	}
	return nil
}

// stale says whether a pooled connection must not be handed out again: it
// has idled past IdleTimeout (the backend's wait_timeout may have closed
// it), or it was opened before an account change. Called with mu held.
func (bp *backendPool) stale(bc *backendConn, now time.Time) bool {
	return now.Sub(bc.idleSince) > bp.cfg.IdleTimeout || bc.logins != bp.cfg.Logins.current()
}

// reap closes the stale pooled connections, so that a burst's connections
// and those of an account that changed do not hold backend threads until a
// session happens to ask for the same key. It returns how many it closed.
func (bp *backendPool) reap(now time.Time) int {
	var doomed []*backendConn
	bp.mu.Lock()
	for key, list := range bp.idle {
		kept := list[:0]
		for _, bc := range list {
			if bp.stale(bc, now) {
				doomed = append(doomed, bc)
			} else {
				kept = append(kept, bc)
			}
		}
		clear(list[len(kept):])
		if len(kept) == 0 {
			delete(bp.idle, key)
		} else {
			bp.idle[key] = kept
		}
	}
	bp.nIdle -= len(doomed)
	bp.mu.Unlock()
	for _, bc := range doomed {
		bc.Conn.Close()
	}
	return len(doomed)
}

// reapEvery is how often the pool looks for stale connections: a quarter
// of the idle timeout, so none idles much past it, and at most 5 s, so an
// account change frees its connections soon (at least 1 ms: a ticker
// needs a positive interval).
func (bp *backendPool) reapEvery() time.Duration {
	return max(min(bp.cfg.IdleTimeout/4, 5*time.Second), time.Millisecond)
}

// reapUntil runs reap on a ticker until stop is closed.
func (bp *backendPool) reapUntil(stop <-chan struct{}) {
	t := time.NewTicker(bp.reapEvery())
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			bp.reap(now)
		}
	}
}

// closeIdle closes every pooled connection, at shutdown. A connection whose
// session has just ended may still be being reset in the background: it is
// closed when that is done, not pooled.
func (bp *backendPool) closeIdle() {
	bp.mu.Lock()
	bp.closed = true
	idle := bp.idle
	bp.idle = map[poolKey][]*backendConn{}
	bp.nIdle = 0
	bp.mu.Unlock()
	for _, list := range idle {
		for _, bc := range list {
			bc.Conn.Close()
		}
	}
}

// backendNetwork splits a backend address into a network and an address:
// "host:port" is TCP, and "unix:/path" or "/path" a Unix socket, for a
// proxy that runs on the backend's own host.
func backendNetwork(addr string) (network, address string) {
	if rest, ok := strings.CutPrefix(addr, "unix:"); ok {
		return "unix", rest
	}
	if strings.HasPrefix(addr, "/") {
		return "unix", addr
	}
	return "tcp", addr
}

// backendDownError is a failure to reach the backend at all.
type backendDownError struct {
	addr string
	err  error
}

func (e *backendDownError) Error() string {
	return fmt.Sprintf("cannot reach backend %s: %v", e.addr, e.err)
}

func (e *backendDownError) Unwrap() error { return e.err }

// collationName maps a handshake collation id to the name go-mysql's client
// wants. An id the table does not know leaves the client's default.
func collationName(id uint8) string {
	if id == 0 {
		return ""
	}
	c, err := charset.GetCollationByID(int(id))
	if err != nil {
		return ""
	}
	return c.Name
}

var _ = strconv.Itoa

// BackendGreets checks that the backend at addr answers a new connection
// with a server greeting (protocol 10), without logging in: what a
// readiness probe asks. An error packet (too many connections, a host
// blocked) or silence until ctx ends is an error.
func BackendGreets(ctx context.Context, addr string) error {
	network, address := backendNetwork(addr)
	conn, err := (&net.Dialer{}).DialContext(ctx, network, address)
	if err != nil {
		return err
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	var head [5]byte // the packet header and the payload's first byte
	if _, err := io.ReadFull(conn, head[:]); err != nil {
		return fmt.Errorf("no greeting: %w", err)
	}
	if head[4] != 10 {
		return fmt.Errorf("the backend answered a connection with a packet of kind %#x, not a greeting", head[4])
	}
	return nil
}

// PoolIdle is how many backend connections wait in the pool, logged in,
// for the next session (a metric).
func (s *Server) PoolIdle() int {
	s.pool.mu.Lock()
	defer s.pool.mu.Unlock()
	return s.pool.nIdle
}
