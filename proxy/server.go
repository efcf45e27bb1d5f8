package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/internal/lograte"
	"tableproxy/internal/mysqlwire"
	"tableproxy/plugins"
)

// User is an account the proxy accepts. The backend connection is opened
// as the same user with the same password, so the backend's grants apply.
type User struct {
	Name     string
	Password string
	Admin    bool // may run the proxy's admin SQL
}

// Config is the proxy's runtime configuration.
type Config struct {
	Listen       string
	ListenSocket string // a Unix socket path to accept local clients on as well; none when empty
	Backend      BackendConfig
	Users        map[string]User
	// Accounts, when set, are the accounts in place of Users, shared with
	// a Connector and replaced on a reload (see Users).
	Accounts        *Users
	ClientTLS       *tls.Config // offer TLS to clients when set
	RequireTLS      bool        // refuse clients that do not use TLS
	AuthPlugin      string      // offered first: mysql_native_password (default) or caching_sha2_password
	MaxConnections  int         // beyond this, clients get error 1040; 0 means 1024
	MaxPacketSize   int         // largest client packet; 0 means 64 MB (the backend's limit also applies)
	ShutdownTimeout time.Duration
	LoginTimeout    time.Duration // a client must finish the handshake within this; 0 means 10s
	ServerVersion   string        // advertised until the backend's version is known
	Logger          *slog.Logger
	// Transactions records the sessions' transactions for the plugins
	// (plugins.Env.Transactions); New makes one when it is nil.
	Transactions *Transactions
	// OutOfMemory, when set and true, has new clients refused with error
	// 1041 (the backend's out-of-memory error) in place of the handshake;
	// the sessions there are go on.
	OutOfMemory func() bool
}

func (c *Config) authPlugin() string {
	if c.AuthPlugin == "" {
		return mysql.AUTH_NATIVE_PASSWORD
	}
	return c.AuthPlugin
}

// Server accepts clients and runs their sessions.
type Server struct {
	cfg   Config
	chain *plugins.Chain
	pool  *backendPool
	log   *slog.Logger

	ln       net.Listener // Listen's TCP address
	sockLn   net.Listener // ListenSocket, or nil
	nextID   atomic.Uint32
	loginLog lograte.Limiter // refused logins: a line a second at most
	active   atomic.Int64
	draining atomic.Bool
	// drainUntil (Unix nanoseconds) ends the moment of a shutdown in which
	// the commands sessions receive are still run (see drainGrace).
	drainUntil atomic.Int64
	wg         sync.WaitGroup

	mu       sync.Mutex // guards sessions; taken on connect, disconnect, KILL and shutdown
	sessions map[uint32]*sessionEntry

	// isolationVar is the index in isolationVars of the name of the
	// isolation level the backend took (see sessionTx.readVars).
	isolationVar atomic.Int32
}

type sessionEntry struct {
	s         *session
	backendID uint32
	backend   net.Conn      // the backend connection's socket, for Shutdown and its idle watcher
	params    backendParams // how it was opened, to kill its statement when the client goes away
}

// New checks cfg and returns a server that is not yet listening.
func New(cfg Config, chain *plugins.Chain) (*Server, error) {
	if cfg.Backend.Addr == "" {
		return nil, errors.New("proxy: no backend address")
	}
	if cfg.Accounts == nil {
		cfg.Accounts = NewUsers(cfg.Users)
	}
	if cfg.Accounts.Len() == 0 {
		return nil, errors.New("proxy: no users configured")
	}
	if p := cfg.authPlugin(); !authPluginSupported(p) {
		return nil, fmt.Errorf("proxy: auth plugin %q not supported (use %s or %s)", p, mysql.AUTH_NATIVE_PASSWORD, mysql.AUTH_CACHING_SHA2_PASSWORD)
	}
	if cfg.RequireTLS && cfg.ClientTLS == nil {
		return nil, errors.New("proxy: require_tls set without a certificate")
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = 1024
	}
	if cfg.MaxPacketSize <= 0 {
		cfg.MaxPacketSize = 64 << 20
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	if cfg.LoginTimeout <= 0 {
		cfg.LoginTimeout = 10 * time.Second
	}
	if cfg.ServerVersion == "" {
		cfg.ServerVersion = "8.0.30-tableproxy"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Transactions == nil {
		cfg.Transactions = NewTransactions()
	}
	s := &Server{cfg: cfg, chain: chain, pool: newBackendPool(cfg.Backend), log: cfg.Logger, loginLog: lograte.Limiter{Every: time.Second},
		sessions: map[uint32]*sessionEntry{}}
	s.nextID.Store(proxyIDBase)
	return s, nil
}

// Listen binds the listening socket and learns the backend's version from
// its greeting (without logging in), so clients see the server they expect.
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("proxy: listen %s: %w", s.cfg.Listen, err)
	}
	s.ln = ln
	if s.cfg.ListenSocket != "" {
		if s.sockLn, err = listenSocket(s.cfg.ListenSocket); err != nil {
			_ = ln.Close()
			return fmt.Errorf("proxy: listen on socket %s: %w", s.cfg.ListenSocket, err)
		}
	}
	if g, err := probeGreeting(s.cfg.Backend.Addr, 3*time.Second); err == nil {
		s.pool.mu.Lock()
		s.pool.greeting = g
		s.pool.mu.Unlock()
	} else {
		s.log.Warn("backend not reachable at start; serving anyway", "backend", s.cfg.Backend.Addr, "err", err)
	}
	return nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// ActiveSessions is the number of connected clients.
func (s *Server) ActiveSessions() int64 { return s.active.Load() }

// backendGreeting is what the proxy tells clients about the server: the
// backend's version and MariaDB capabilities, or the configured version
// until the backend has been seen.
func (s *Server) backendGreeting() greeting {
	g := s.pool.lastGreeting()
	if g.version == "" {
		g.version = s.cfg.ServerVersion
	}
	return g
}

// SocketAddr is the Unix socket the server listens on as well, or nil.
func (s *Server) SocketAddr() net.Addr {
	if s.sockLn == nil {
		return nil
	}
	return s.sockLn.Addr()
}

// listeners are the ones Listen opened: TCP, and the Unix socket if any.
func (s *Server) listeners() []net.Listener {
	var lns []net.Listener
	for _, ln := range []net.Listener{s.ln, s.sockLn} {
		if ln != nil {
			lns = append(lns, ln)
		}
	}
	return lns
}

// Serve accepts clients on every listener until Shutdown. It returns nil
// after a shutdown. If one listener fails, the others are closed too and
// Serve returns that error.
func (s *Server) Serve() error {
	stop := make(chan struct{}) // the pool's reaper runs while Serve does
	defer close(stop)
	go s.pool.reapUntil(stop)
	go s.lifetimeSweep(stop)
	lns := s.listeners()
	errc := make(chan error, len(lns))
	for _, ln := range lns {
		go func() { errc <- s.accept(ln) }()
	}
	var first error
	for range lns {
		if err := <-errc; err != nil && first == nil {
			first = err
			for _, ln := range lns {
				_ = ln.Close()
			}
		}
	}
	return first
}

// accept runs one listener's sessions until it is closed.
func (s *Server) accept(ln net.Listener) error {
	var pause time.Duration // after a passing failure; doubled while it lasts
	for {
		conn, err := ln.Accept()
		if err != nil {
			if s.draining.Load() {
				return nil
			}
			if !acceptCanRetry(err) {
				return err
			}
			// Out of descriptors or memory for a moment (a burst of
			// clients): serve the sessions there are and try again,
			// rather than end every listener.
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed; retrying", "listen", ln.Addr().String(), "err", err, "in", pause)
			time.Sleep(pause)
			continue
		}
		pause = 0
		if s.active.Add(1) > int64(s.cfg.MaxConnections) {
			s.active.Add(-1)
			go s.refuse(conn, mysql.NewError(mysql.ER_CON_COUNT_ERROR, "Too many connections"))
			continue
		}
		if oom := s.cfg.OutOfMemory; oom != nil && oom() {
			s.active.Add(-1)
			go s.refuse(conn, errOutOfMemory)
			continue
		}
		s.wg.Add(1)
		go s.serveConn(conn)
	}
}

// logRefusedLogin logs a login the proxy or the backend refused, with
// the client's address and the error (which names the user), at most
// one line a second; the next says how many were held back. A client that
// went away before its login ended is not logged.
func (s *Server) logRefusedLogin(remote net.Addr, me *mysql.MyError, err error) {
	if me == nil {
		return
	}
	ok, held := s.loginLog.Allow("login")
	if !ok {
		return
	}
	attrs := []any{"client", remote.String(), "code", me.Code, "err", me.Message}
	if held > 0 {
		attrs = append(attrs, "more_refused_since_last_line", held)
	}
	s.log.Info("login refused", attrs...)
}

// errOutOfMemory is what a client is refused with while the proxy is past
// its memory limit: the number and SQLSTATE MariaDB and MySQL send when
// they cannot allocate for a new connection.
var errOutOfMemory = mysql.NewError(mysql.ER_OUT_OF_RESOURCES,
	"Out of memory; the proxy's memory stays past memory_limit after shedding its caches: try again later")

// refuse answers a connection it will not serve with an error in place of
// the handshake, as a MySQL server does.
func (s *Server) refuse(conn net.Conn, e *mysql.MyError) {
	c := newClientConn(conn)
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	_ = c.writeError(e)
	_ = c.flush()
	_ = conn.Close()
	s.chain.Conn(plugins.ConnEvent{Kind: plugins.ConnRejected, Remote: conn.RemoteAddr(), Err: e})
}

func (s *Server) serveConn(conn net.Conn) {
	id := s.nextID.Add(1)
	sess := &session{srv: s, id: id, client: newClientConn(conn), log: s.log, watch: phaseWatch{done: make(chan struct{}, 1)}}
	// end is the one way a session ends, whether it quit, failed, was
	// refused at login or panicked: what it holds is released and the
	// plugins are told, so nothing it held (a write intent, a pin, a
	// count) outlives it.
	opened, clean := false, false
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("session panic", "conn", id, "panic", r, "stack", string(debug.Stack()))
			clean = false
		}
		s.endSession(sess, conn, opened, clean)
	}()
	_ = conn.SetDeadline(time.Now().Add(s.cfg.LoginTimeout))
	if s.draining.Load() {
		return
	}
	if err := sess.login(context.Background()); err != nil {
		_ = sess.client.flush() // the ERR packet, if login wrote one
		var me *mysql.MyError
		errors.As(err, &me)
		s.chain.Conn(plugins.ConnEvent{Kind: plugins.ConnRejected, ConnID: id, User: sess.user.Name, Remote: conn.RemoteAddr(), Err: me})
		s.logRefusedLogin(conn.RemoteAddr(), me, err)
		return
	}
	_ = conn.SetDeadline(time.Time{})
	opened = true
	s.chain.Conn(plugins.ConnEvent{Kind: plugins.ConnOpened, ConnID: id, User: sess.user.Name, Remote: conn.RemoteAddr()})
	clean = sess.run()
}

// endSession releases what a session holds. clean: its backend
// connection is fit for another session. opened: the plugins were told it
// opened, and are told it closed.
func (s *Server) endSession(sess *session, conn net.Conn, opened, clean bool) {
	defer s.wg.Done()
	defer s.active.Add(-1)
	s.unregister(sess)
	if sess.backend != nil {
		s.pool.release(sess.backend, clean && !sess.killed.Load() && !sess.usedXA)
	}
	_ = sess.client.flush()
	_ = conn.Close()
	if opened {
		s.chain.Conn(plugins.ConnEvent{Kind: plugins.ConnClosed, ConnID: sess.id, User: sess.user.Name, Remote: conn.RemoteAddr()})
	}
}

// registerBackend records which backend thread serves the session, for KILL.
func (s *Server) registerBackend(sess *session) {
	s.mu.Lock()
	s.sessions[sess.id] = &sessionEntry{s: sess, backendID: sess.backend.threadID, backend: sess.backend.Conn.Conn, params: sess.params}
	s.mu.Unlock()
	s.cfg.Transactions.add(sess.id, &sess.tx.rec)
}

func (s *Server) unregister(sess *session) {
	s.mu.Lock()
	if e, ok := s.sessions[sess.id]; ok && e.s == sess {
		delete(s.sessions, sess.id)
	}
	s.mu.Unlock()
	s.cfg.Transactions.remove(sess.id, &sess.tx.rec)
}

func (s *Server) lookupSession(id uint64) (*session, uint64, bool) {
	if id > 1<<32-1 {
		return nil, 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.sessions[uint32(id)]
	if !ok {
		return nil, 0, false
	}
	return e.s, uint64(e.backendID), true
}

// Shutdown stops accepting, closes idle sessions at once, lets busy ones
// finish their statement (and an open transaction) until the timeout, then
// closes whatever is left.
func (s *Server) Shutdown(ctx context.Context) error {
	s.drainUntil.Store(time.Now().Add(drainGrace).UnixNano())
	s.draining.Store(true)
	for _, ln := range s.listeners() {
		_ = ln.Close() // (the socket's removes its file)
	}
	s.chain.Drain()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ShutdownTimeout)
	defer cancel()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		// Sessions that sit idle outside a transaction take what their
		// clients send until the grace ends, then their read ends and the
		// loop sees draining (see drainGrace). Repeated, because a
		// session can finish a statement (or commit) after the previous
		// pass.
		s.mu.Lock()
		for _, e := range s.sessions {
			// (A session that has set its own deadline keeps it: a
			// later one, for a command on its way.)
			if e.s.isIdle() && !e.s.inTxShared() && !e.s.drainArmed.Load() {
				_ = e.s.client.raw.SetReadDeadline(s.drainReadDeadline())
				e.s.drainArmed.Store(true)
			}
		}
		s.mu.Unlock()
		select {
		case <-done:
			s.pool.closeIdle()
			return nil
		case <-ctx.Done():
			s.mu.Lock()
			n := len(s.sessions)
			for _, e := range s.sessions {
				_ = e.s.client.raw.Close()
				// A session waiting for the backend's answer would wait
				// as long as the statement runs there (a report, a lock
				// wait): its read ends now too, so the timeout bounds the
				// shutdown. The statement itself goes on in the backend
				// until it ends, as when a direct client goes away; an
				// open transaction is rolled back then.
				_ = e.backend.SetDeadline(time.Now())
			}
			s.mu.Unlock()
			<-done
			s.pool.closeIdle()
			return fmt.Errorf("proxy: shutdown timeout: closed %d sessions", n)
		case <-tick.C:
		}
	}
}

// drainGrace is how long after a shutdown begins the commands that
// sessions outside a transaction receive are still run: those a client
// sent as the shutdown began, which it will be answered. After it, such
// a session answers its next command with error 1053 (what MariaDB says
// to a statement that comes during its shutdown) instead of running it,
// and ends; one that receives nothing meanwhile ends quietly, its client
// finding the connection closed before it sends (as connection pools
// check).
const drainGrace = 250 * time.Millisecond

// drainReadDeadline is when a draining session's wait for its client's
// next command ends: the end of the grace, or a moment from now for a
// command already on its way.
func (s *Server) drainReadDeadline() time.Time {
	return time.Unix(0, max(s.drainUntil.Load(), time.Now().Add(50*time.Millisecond).UnixNano()))
}

// probeGreeting reads the backend's greeting without logging in.
func probeGreeting(addr string, timeout time.Duration) (greeting, error) {
	network, address := backendNetwork(addr)
	conn, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return greeting{}, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	c := newClientConn(conn)
	p, err := c.pc.ReadPacket()
	if err != nil {
		return greeting{}, err
	}
	if len(p) > 0 && p[0] == mysqlwire.MarkErr {
		return greeting{}, mysqlwire.ParseErr(p)
	}
	g, ok := parseGreeting(p)
	if !ok {
		return greeting{}, errors.New("malformed greeting")
	}
	return g, nil
}
