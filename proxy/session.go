package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/internal/mysqlwire"
	"tableproxy/internal/sqllex"
	"tableproxy/plugins"
)

// session is one client connection, bound to one backend connection for its
// whole life. The backend holds all session state (current database,
// variables, transactions, temporary tables, prepared statements); the proxy
// keeps only what it needs to route and to tell the plugins, the session's
// transaction among it (see txview.go).
type session struct {
	srv    *Server
	id     uint32 // the connection id the client sees
	client *clientConn
	log    *slog.Logger
	// drainArmed: during a shutdown, the wait for the client's next
	// command has its deadline (see drainGrace).
	drainArmed atomic.Bool

	user    User
	salt    []byte
	params  backendParams
	backend *backendConn
	db      string // current database, as far as the proxy has seen it change
	status  uint16 // the session-state bits of the latest status (see sessionStatusFlags)

	cmd  packetBuffer // the client's current command
	resp packetBuffer // the packet being relayed
	sink bool         // the response being read is dropped, not relayed (see relayWithBegin)

	st    plugins.Statement
	tx    sessionTx            // the session's transaction, as st.Tx shows it
	stmts map[uint32]*prepared // by the backend's statement id
	// out and answer are the current statement's outcome and the writer a
	// plugin answers through, kept here rather than allocated per
	// statement (plugins see them only during the call, like st).
	out    plugins.Outcome
	answer answerWriter
	exec   *prepared // the statement of the COM_STMT_EXECUTE being handled

	capture     *plugins.Capture // set while relaying a response a plugin asked to see
	captureSets int              // result sets seen while capturing
	record      *plugins.Capture // capture, when it asked for every packet (Full)

	// phase says what the session is doing, for the sweeper that watches
	// its connections (see lifetime.go); phaseNow is the session's own
	// copy of what it last stored there, swept the sweeper's.
	phase    atomic.Uint64
	phaseNow uint64
	swept    uint64
	watch    phaseWatch
	txOpen   atomic.Bool // mirrors the IN_TRANS status flag for Shutdown
	killed   atomic.Bool // KILL CONNECTION aimed at this session
	// usedXA: the session ran an XA statement. Its backend connection is
	// closed, not pooled: COM_RESET_CONNECTION leaves an XA transaction in
	// the PREPARED state on it (MariaDB), where a session that closes
	// directly would leave it to XA COMMIT from any connection.
	usedXA bool
	// backendLost: a query the proxy or a plugin ran on the backend
	// connection between relays failed below the protocol, so the
	// connection is gone and the session ends as after a failed relay.
	backendLost bool
}

// noteBackendError records that err, from a query on the session's backend
// connection, means the connection is gone: anything but the server's own
// ERR packet, which go-mysql returns as a *mysql.MyError, wrapped when it
// ends a result set part way.
func (s *session) noteBackendError(err error) {
	var me *mysql.MyError
	if err != nil && !errors.As(err, &me) {
		s.backendLost = true
	}
}

// sessionBackend lets plugins query the session's backend connection
// between statements.
type sessionBackend struct{ s *session }

func (b sessionBackend) Query(sql string) (*mysql.Result, error) {
	r, err := b.s.backend.Execute(sql)
	b.s.noteBackendError(err)
	return r, err
}

// prepared is what the proxy keeps of a prepared statement.
type prepared struct {
	sql     string
	nparams int
	types   []byte // parameter types last bound by the client
	// sentTypes are the types the backend last received for it. The
	// client sends types only when it binds new ones; when the execute
	// that carried them was answered by a plugin, the backend has not
	// seen them and the next forwarded execute must carry them again.
	sentTypes []byte
	memo      plugins.Memo
	db        string // the current database when it was prepared: its names resolve there
	// longData: the client has sent a parameter with
	// COM_STMT_SEND_LONG_DATA. It is never cleared, so a statement that
	// used long data once is never taken for one whose parameters are all
	// in the execute packet.
	longData bool
}

// bindParams remembers the parameter types a COM_STMT_EXECUTE carries:
// flags (1), iteration count (4), NULL bitmap, new-params-bound flag (1),
// then the types when that flag is 1.
func (ps *prepared) bindParams(b []byte) {
	if ps.nparams == 0 {
		return
	}
	off := 5 + (ps.nparams+7)/8
	if off < len(b) && b[off] == 1 && off+1+2*ps.nparams <= len(b) {
		ps.types = append(ps.types[:0], b[off+1:off+1+2*ps.nparams]...)
	}
}

// withBackendTypes returns the COM_STMT_EXECUTE packet buf (header room
// and payload) as the backend must receive it: unchanged when the backend
// already has the parameter types in force, otherwise rebuilt with the
// new-params-bound flag set and the types the client last bound.
func (ps *prepared) withBackendTypes(buf []byte) []byte {
	if ps.nparams == 0 {
		return buf
	}
	const head = 4 + 1 + 4 + 1 + 4 // header room, command, statement id, flags, iteration count
	off := head + (ps.nparams+7)/8
	if off >= len(buf) {
		return buf // malformed: the backend will say so
	}
	if buf[off] == 1 {
		ps.sentTypes = append(ps.sentTypes[:0], ps.types...)
		return buf
	}
	if ps.types == nil || bytes.Equal(ps.sentTypes, ps.types) {
		return buf
	}
	out := make([]byte, 0, len(buf)+len(ps.types))
	out = append(out, buf[:off]...)
	out = append(out, 1)
	out = append(out, ps.types...)
	out = append(out, buf[off+1:]...)
	ps.sentTypes = append(ps.sentTypes[:0], ps.types...)
	return out
}

func (s *session) inTx() bool { return s.status&mysql.SERVER_STATUS_IN_TRANS != 0 }

// inTxShared is inTx for other goroutines.
func (s *session) inTxShared() bool { return s.txOpen.Load() }

// sessionStatusFlags are the server status bits that describe the session
// itself. The others (no index used, more results, cursor, query was
// slow, ...) describe only the response they came with: a response the
// proxy writes itself must not inherit them from the statement before.
const sessionStatusFlags = mysql.SERVER_STATUS_IN_TRANS | mysql.SERVER_STATUS_AUTOCOMMIT |
	mysql.SERVER_STATUS_NO_BACKSLASH_ESCAPED | mysql.SERVER_STATUS_IN_TRANS_READONLY

// setStatus records the session state a response's status reports.
func (s *session) setStatus(status uint16) {
	status &= sessionStatusFlags
	s.status = status
	if tx := status&mysql.SERVER_STATUS_IN_TRANS != 0; tx != s.txOpen.Load() {
		s.txOpen.Store(tx)
	}
}

// maxPacket is the largest command the proxy accepts from the client: the
// smaller of its own limit and the backend's max_allowed_packet.
func (s *session) maxPacket() int {
	limit := s.srv.cfg.MaxPacketSize
	if s.backend != nil && s.backend.maxPacket < limit {
		limit = s.backend.maxPacket
	}
	return limit
}

// login runs the handshake and authentication, then binds a backend
// connection. On failure the client has been told why.
func (s *session) login(ctx context.Context) error {
	c := s.client
	s.salt = newSalt()
	caps := serverCaps
	if s.srv.cfg.ClientTLS != nil {
		caps |= mysql.CLIENT_SSL
	}
	g := s.srv.backendGreeting()
	extCaps := g.extCaps & relayedMariaDBCaps
	if s.srv.cfg.Backend.TLS != nil {
		extCaps = 0 // see extCapsConn
	}
	hs := appendInitialHandshake(newPacket(128), g.version, s.id, s.salt, caps, extCaps, 45, s.srv.cfg.authPlugin())
	if err := c.writePacket(hs); err != nil {
		return err
	}
	var pkt packetBuffer
	pkt.reset(64 << 10)
	if err := c.readPacket(&pkt); err != nil {
		return err
	}
	if p := pkt.payload(); len(p) == sslRequestLen && caps&mysql.CLIENT_SSL != 0 &&
		binary.LittleEndian.Uint32(p)&mysql.CLIENT_SSL != 0 {
		if err := c.startTLS(s.srv.cfg.ClientTLS); err != nil {
			return err
		}
		pkt.reset(64 << 10)
		if err := c.readPacket(&pkt); err != nil {
			return err
		}
	}
	resp, err := parseHandshakeResponse(pkt.payload())
	if err != nil {
		_ = c.writeError(mysql.NewError(mysql.ER_HANDSHAKE_ERROR, "Bad handshake"))
		return err
	}
	c.caps = resp.caps & caps
	c.extCaps = resp.extCaps & extCaps
	if extCaps != 0 && resp.caps&clientMySQL != 0 {
		c.extCaps = 0
	}
	if s.srv.cfg.RequireTLS && !c.tls && !c.local {
		me := mysql.NewError(mysql.ER_ACCESS_DENIED_ERROR, fmt.Sprintf("Access denied for user '%s': connections must use TLS", resp.user))
		_ = c.writeError(me)
		return me
	}
	if err := s.authenticate(resp.user, resp.plugin, resp.auth); err != nil {
		return err
	}
	s.params = backendParams{user: s.user.Name, password: s.user.Password, db: resp.db,
		collation: resp.collation, caps: c.caps, extCaps: c.extCaps, attrs: resp.attrs}
	if err := s.bindBackend(ctx); err != nil {
		return err
	}
	s.db = resp.db
	ok := mysqlwire.AppendOK(newPacket(16), mysqlwire.OK{Status: s.status})
	if err := c.writePacket(ok); err != nil {
		return err
	}
	c.startCommandPhase()
	return c.flush()
}

// authenticate checks the client's credentials for user, switching the
// client to the proxy's default auth plugin when it chose one the proxy
// cannot verify. It writes the ERR packet itself on failure.
func (s *session) authenticate(name, plugin string, auth []byte) error {
	c := s.client
	if !authPluginSupported(plugin) {
		plugin = s.srv.cfg.authPlugin()
		s.salt = newSalt()
		sw := newPacket(64)
		sw = append(sw, mysqlwire.MarkEOF)
		sw = append(sw, plugin...)
		sw = append(sw, 0)
		sw = append(sw, s.salt...)
		sw = append(sw, 0)
		if err := c.writePacket(sw); err != nil {
			return err
		}
		var pkt packetBuffer
		pkt.reset(4 << 10)
		// COM_CHANGE_USER reads the client mid-command: no watcher may
		// hold its socket meanwhile (see lifetime.go).
		s.enterPhase(phaseBusyReading)
		err := c.readPacket(&pkt)
		s.enterPhase(phaseBusy)
		if err != nil {
			return err
		}
		auth = pkt.payload()
	}
	u, found := s.srv.cfg.Accounts.Get(name)
	if !found || !checkScramble(plugin, s.salt, auth, u.Password) {
		using := "YES"
		if len(auth) == 0 {
			using = "NO"
		}
		me := mysql.NewError(mysql.ER_ACCESS_DENIED_ERROR,
			fmt.Sprintf("Access denied for user '%s'@'%s' (using password: %s)", name, hostOf(c.raw.RemoteAddr()), using))
		_ = c.writeError(me)
		_ = c.flush()
		return me
	}
	if plugin == mysql.AUTH_CACHING_SHA2_PASSWORD && len(u.Password) > 0 {
		// fast_auth_success: the scramble matched, no full authentication.
		if err := c.writePacket(append(newPacket(2), 0x01, 0x03)); err != nil {
			return err
		}
	}
	s.user = u
	return nil
}

// bindBackend opens (or takes from the pool) the session's backend
// connection. It writes the ERR packet itself on failure.
func (s *session) bindBackend(ctx context.Context) error {
	bc, err := s.srv.pool.get(ctx, &s.params)
	if err != nil {
		var me *mysql.MyError
		if !errors.As(err, &me) {
			s.log.Warn("backend connect failed", "err", err)
			me = backendUnreachable(s.srv.cfg.Backend.Addr, err)
		}
		_ = s.client.writeError(me)
		_ = s.client.flush()
		return me
	}
	s.backend = bc
	// The session starts as the backend's did: with autocommit as its
	// global value (or init_connect) left it, which go-mysql read from the
	// status of the last query it ran on the connection (at dial, or after
	// the pool's reset).
	var status uint16
	if bc.IsAutoCommit() {
		status = mysql.SERVER_STATUS_AUTOCOMMIT
	}
	s.setStatus(status)
	if s.tx.s == nil {
		s.tx = sessionTx{s: s, txs: s.srv.cfg.Transactions}
	} else {
		s.tx.reset() // a new backend connection: a new session there
	}
	s.st = plugins.Statement{ConnID: s.id, User: s.user.Name, Admin: s.user.Admin, Remote: s.client.raw.RemoteAddr(),
		Tx: &s.tx, Session: &plugins.SessionState{}, Backend: sessionBackend{s},
		ExtendedMetadata: s.client.extCaps&mariadbExtendedMetadata != 0, Dialect: sqllex.DialectOf(bc.GetServerVersion())}
	s.stmts = map[uint32]*prepared{}
	s.srv.registerBackend(s)
	return nil
}

// backendUnreachable is the error a client gets when the proxy cannot open
// a backend connection for it. A direct client would get its library's own
// error 2003, but that number is the client's to give: MariaDB Connector/C
// takes a client-range number in a server's ERR packet for a malformed
// packet (error 2027). So the proxy sends the server's error for a data
// source it cannot reach, with the reason in the message.
func backendUnreachable(addr string, err error) *mysql.MyError {
	var down *backendDownError
	if errors.As(err, &down) {
		err = down.err // the address is in the message already
	}
	return &mysql.MyError{Code: mysql.ER_CONNECT_TO_FOREIGN_DATA_SOURCE, State: "HY000",
		Message: fmt.Sprintf("Can't connect to the backend MySQL server on '%s' (tableproxy: %v)", addr, err)}
}

// run serves commands until the client quits, a side breaks, or the proxy
// drains.
func (s *session) run() (clean bool) {
	// A watcher armed in the last phase must be gone before the backend
	// connection is pooled or closed.
	defer s.enterPhase(phaseBusy)
	for {
		s.client.pc.ResetSequence()
		s.cmd.reset(s.maxPacket())
		s.enterPhase(phaseIdle)
		draining := s.srv.draining.Load() && !s.inTx()
		if draining {
			// The client may have sent its next command already: it is
			// read, and answered (see drainGrace). Nothing read by the
			// deadline: the session ends (the read's error, below).
			_ = s.client.raw.SetReadDeadline(s.srv.drainReadDeadline())
			s.drainArmed.Store(true)
		}
		err := s.client.readPacket(&s.cmd)
		if !s.enterPhase(phaseBusy) {
			// The backend closed the connection while the client was
			// idle: the client's closes the same way.
			s.endIdleLost()
			return false
		}
		if err != nil {
			if s.cmd.overflow {
				_ = s.client.writeError(mysql.NewError(mysql.ER_NET_PACKET_TOO_LARGE, "Got a packet bigger than 'max_allowed_packet' bytes"))
				_ = s.client.flush()
				s.log.Info("client packet too large", "limit", s.maxPacket())
				return false
			}
			if strings.Contains(err.Error(), "invalid sequence") {
				_ = s.client.writeError(mysql.NewError(mysql.ER_NET_PACKETS_OUT_OF_ORDER, "Got packets out of order"))
				_ = s.client.flush()
			}
			// A client that went away between commands leaves the backend
			// connection clean.
			return true
		}
		if len(s.cmd.payload()) == 0 {
			_ = s.client.writeError(mysql.NewError(mysql.ER_UNKNOWN_COM_ERROR, "Unknown command"))
			_ = s.client.flush()
			continue
		}
		if draining || s.srv.draining.Load() && !s.inTx() {
			if time.Now().UnixNano() > s.srv.drainUntil.Load() {
				// Past the grace: not run, and said so.
				if s.cmd.payload()[0] != mysql.COM_QUIT {
					_ = s.client.writeError(mysql.NewError(mysql.ER_SERVER_SHUTDOWN, "Server shutdown in progress"))
					_ = s.client.flush()
				}
				return true
			}
			_ = s.client.raw.SetReadDeadline(time.Time{})
		}
		quit, err := s.dispatch()
		if err == nil && s.backendLost {
			err = errBackendLost // a plugin's query after the response
		}
		if err != nil {
			switch {
			case errors.Is(err, errBackendLost):
				// The client loses its connection as it would have lost
				// a direct one: what was relayed reaches it, then the
				// socket closes without a packet of the proxy's own. Its
				// library reports that in its own words (error 2013, or
				// the driver's bad connection), which is what its retry
				// and reconnect logic looks for. An ERR packet with the
				// client-side number 2013 would not do: MariaDB
				// Connector/C refuses client-range numbers from a server
				// as a malformed packet (error 2027).
				s.log.Warn("backend connection lost", "conn", s.id)
				_ = s.client.flush()
			case errors.Is(err, errSessionEnds):
				_ = s.client.flush() // the error that says why
			case errors.Is(err, errClientGone):
			default:
				s.log.Warn("session error", "conn", s.id, "err", err)
			}
			return false
		}
		if err := s.client.flush(); err != nil {
			return true
		}
		s.cmd.shrink()
		if quit || s.killed.Load() {
			return !s.killed.Load()
		}
	}
}

// dispatch handles one command. It returns quit=true for COM_QUIT.
func (s *session) dispatch() (quit bool, err error) {
	p := s.cmd.payload()
	switch p[0] {
	case mysql.COM_QUIT:
		return true, nil
	case mysql.COM_QUERY:
		return false, s.handleStatement(plugins.ComQuery, p[1:])
	case mysql.COM_STMT_PREPARE:
		return false, s.handleStatement(plugins.ComStmtPrepare, p[1:])
	case mysql.COM_STMT_EXECUTE:
		s.exec = nil
		if len(p) < 5 {
			return false, s.client.writeError(mysql.NewError(mysql.ER_MALFORMED_PACKET, "Malformed communication packet"))
		}
		ps, ok := s.stmts[binary.LittleEndian.Uint32(p[1:])]
		if !ok {
			// Unknown to the proxy, so unknown to the backend too: let the
			// backend say so in its own words.
			return false, s.relay(s.relayQueryResponse)
		}
		s.st.ResetMemo(plugins.ComStmtExecute, ps.sql, &ps.memo)
		s.st.NoBackslashEscapes = s.status&mysql.SERVER_STATUS_NO_BACKSLASH_ESCAPED != 0
		s.st.DB = ps.db
		s.exec = ps
		ps.bindParams(p[5:])
		s.st.Params, s.st.ParamCount, s.st.ParamTypes, s.st.LongData = p[5:], ps.nparams, ps.types, ps.longData
		return false, s.runStatement()
	case mysql.COM_STMT_SEND_LONG_DATA:
		if len(p) >= 5 {
			if ps, ok := s.stmts[binary.LittleEndian.Uint32(p[1:])]; ok {
				ps.longData = true
			}
		}
		return false, s.forward() // no response
	case mysql.COM_STMT_CLOSE:
		if len(p) >= 5 {
			delete(s.stmts, binary.LittleEndian.Uint32(p[1:]))
		}
		return false, s.forward() // no response
	case mysql.COM_STMT_RESET, mysql.COM_PING, mysql.COM_SET_OPTION, mysql.COM_REFRESH, mysql.COM_DEBUG, mysql.COM_STATISTICS:
		return false, s.relay(s.relayOne)
	case mysql.COM_STMT_FETCH, mysql.COM_FIELD_LIST:
		return false, s.relay(s.relayRows)
	case mysql.COM_PROCESS_INFO:
		return false, s.relay(s.relayQueryResponse)
	case mysql.COM_INIT_DB:
		// The chain sees it as the USE statement it is (the mysql client's
		// own `use` command sends it), so a plugin can answer it, as the
		// virtual schema does for its database; otherwise the command itself
		// goes to the backend (runStatement relays the command received).
		s.st.Reset(plugins.ComQuery, "USE "+mysqlwire.QuoteIdent(string(p[1:])))
		return false, s.runStatement()
	case mysql.COM_RESET_CONNECTION:
		var st relayStats
		if err := s.relayWith(&st, s.relayOne); err != nil {
			return false, err
		}
		if st.err == nil {
			s.stateReset()
		}
		return false, nil
	case mysql.COM_PROCESS_KILL:
		if len(p) < 5 {
			return false, s.client.writeError(mysql.NewError(mysql.ER_MALFORMED_PACKET, "Malformed communication packet"))
		}
		return false, s.kill(false, "", uint64(binary.LittleEndian.Uint32(p[1:])))
	case mysql.COM_CHANGE_USER:
		return false, s.changeUser(p[1:])
	}
	// Replication, shutdown and other server-only commands are not proxied.
	return false, s.client.writeError(mysql.NewError(mysql.ER_UNKNOWN_COM_ERROR, "Unknown command"))
}

// relay forwards the command and relays the response with fn.
func (s *session) relay(fn func(*relayStats) error) error {
	var st relayStats
	return s.relayWith(&st, fn)
}

func (s *session) relayWith(st *relayStats, fn func(*relayStats) error) error {
	if err := s.forward(); err != nil {
		return err
	}
	if err := fn(st); err != nil {
		return err
	}
	if st.haveStat {
		s.setStatus(st.status)
	}
	return nil
}

// handleStatement runs a COM_QUERY or COM_STMT_PREPARE through the chain.
func (s *session) handleStatement(cmd plugins.Command, text []byte) error {
	// The statement text aliases the command buffer, which stays untouched
	// until the next command (responses are relayed through s.resp), except
	// that forwarding a command of 16 MB or more rewrites its split points.
	var sql string
	if len(text) >= mysql.MaxPayloadLen-1 {
		sql = string(text)
	} else {
		sql = unsafe.String(unsafe.SliceData(text), len(text))
	}
	s.st.Reset(cmd, sql)
	s.st.NoBackslashEscapes = s.status&mysql.SERVER_STATUS_NO_BACKSLASH_ESCAPED != 0
	return s.runStatement()
}

// runStatement takes the statement in s.st through the plugin chain and,
// unless a plugin answers or refuses it, to the backend.
func (s *session) runStatement() error {
	st := &s.st
	cmd := st.Command
	if cmd != plugins.ComStmtExecute {
		st.DB = s.db // (dispatch set an execution's)
	}
	st.InTx = s.inTx()
	s.tx.starting(st)
	if cmd == plugins.ComQuery && (st.Kind == plugins.KindOther || strings.IndexByte(st.SQL, ';') >= 0) && mayBeXA(st.SQL) {
		s.usedXA = true
	}
	if cmd == plugins.ComQuery && st.MayChangeAccounts() {
		// After it ran: sessions that start from then on log in afresh.
		defer s.srv.pool.cfg.Logins.Changed()
	}
	chain := s.srv.chain
	observe := chain.HasObservers()
	var start time.Time
	if observe {
		start = time.Now()
	}
	out := &s.out
	*out = plugins.Outcome{}
	action, by := chain.Before(st)
	if action.Verdict == plugins.Answer && cmd == plugins.ComStmtPrepare {
		action = plugins.Continue // see plugins.StatementFilter
	}
	if st.Begin && action.Verdict != plugins.Pass {
		// The statement does not reach the backend: the transaction a
		// filter asked for starts there on its own.
		if me := s.beginAlone(); me != nil {
			action, by = plugins.RefuseWith(me), "proxy"
		}
	}
	var err error
	var rs relayStats
	switch {
	case s.backendLost:
		// A plugin's query (or the BEGIN above) lost the backend
		// connection: the client loses its connection as a direct one
		// would (see run), whatever the statement was refused with.
		out.Source, out.Plugin, out.Err = plugins.FromProxy, by, action.Err
		err = errBackendLost
	case action.Verdict == plugins.Refuse:
		out.Source, out.Plugin, out.Err = plugins.FromProxy, by, action.Err
		err = s.client.writeError(action.Err)
		if err != nil {
			err = errClientGone
		}
	case action.Verdict == plugins.Answer:
		out.Source, out.Plugin = plugins.FromPlugin, by
		w := &s.answer
		*w = answerWriter{s: s, binary: cmd == plugins.ComStmtExecute}
		err = action.Responder.Respond(w)
		out.Err, out.Rows, out.AffectedRows = w.err, w.rows, w.affected
		if err != nil && !errors.Is(err, errClientGone) {
			s.log.Warn("plugin answer failed", "plugin", by, "err", err)
			err = errClientGone
		}
	default:
		if c := action.Capture; c != nil && cmd != plugins.ComStmtPrepare {
			c.Columns, c.Binary = c.Columns[:0], cmd == plugins.ComStmtExecute
			s.capture, s.captureSets = c, 0
			if c.Full {
				c.Data, c.Ends, c.Truncated = c.Data[:0], c.Ends[:0], false
				s.record = c
			}
		}
		err = s.forwardStatement(cmd, st, &rs, action.PrepareAs)
		if s.capture != nil {
			if s.captureSets != 1 || rs.err != nil {
				s.capture.Columns = nil
			}
			s.capture.FinalStatus = rs.status
			s.capture.Results, s.capture.Warnings = rs.results, rs.warnings
			s.capture, s.record = nil, nil
		}
		out.Source, out.Err, out.Rows, out.AffectedRows, out.Warnings = plugins.FromBackend, rs.err, rs.rows, rs.affected, rs.warnings
	}
	out.Status = s.status
	if rs.haveStat {
		out.Status = rs.status // as relayed, with the statement's own bits
	}
	s.tx.ended(st, out)
	if observe {
		out.Duration = time.Since(start)
		if err != nil && out.Err == nil {
			out.Err = mysql.NewError(2013, err.Error())
		}
		chain.After(st, out)
	}
	st.Finish(out) // the chain is done with its tree
	return err
}

// forwardStatement sends a statement to the backend, with the proxy's own
// handling of the statements it must rewrite (KILL) or track (USE).
func (s *session) forwardStatement(cmd plugins.Command, st *plugins.Statement, rs *relayStats, prepareAs string) error {
	switch cmd {
	case plugins.ComStmtPrepare:
		send := s.forward
		if prepareAs != "" {
			send = func() error {
				return s.forwardPacket(append(append(make([]byte, 4, 5+len(prepareAs)), mysql.COM_STMT_PREPARE), prepareAs...))
			}
		}
		if err := send(); err != nil {
			return err
		}
		id, nparams, err := s.relayPrepareResponse(rs)
		if err == nil && rs.err == nil {
			s.stmts[id] = &prepared{sql: strings.Clone(st.SQL), nparams: nparams, db: s.db}
		}
		return err
	case plugins.ComQuery:
		switch st.Kind {
		case plugins.KindKill:
			if k, ok := parseKill(st.SQL); ok {
				return s.kill(k.query, k.modifier, k.id)
			}
		case plugins.KindUse:
			if err := s.relayWith(rs, s.relayQueryResponse); err != nil {
				return err
			}
			if rs.err == nil {
				if db, ok := parseUse(st.SQL); ok {
					s.db = strings.Clone(db) // st.SQL points into the command buffer
				}
			}
			return nil
		}
	}
	if st.Begin {
		return s.relayWithBegin(rs)
	}
	if err := s.relayWith(rs, s.relayQueryResponse); err != nil {
		return err
	}
	if rs.results > 1 {
		// A multi-statement request (or a procedure) may have changed the
		// current database; plugins resolve table names against it.
		s.refreshDB()
	}
	return nil
}

// beginAlone starts a transaction on the backend (see plugins.Statement's
// Begin).
func (s *session) beginAlone() *mysql.MyError {
	r, err := s.backend.Execute("BEGIN")
	if err != nil {
		var me *mysql.MyError
		if errors.As(err, &me) {
			return me
		}
		s.noteBackendError(err)
		return mysql.NewError(2013, "Lost connection to backend while starting the transaction")
	}
	s.setStatus(r.Status)
	r.Close()
	return nil
}

// relayWithBegin sends BEGIN and the statement together, so a transaction
// a filter began at the proxy costs no round trip of its own, then relays
// the statement's response. Should BEGIN fail (the statement has run
// anyway, outside a transaction: plugins ask this only of plain reads),
// the statement's response is read and dropped, and the client gets
// BEGIN's error.
func (s *session) relayWithBegin(rs *relayStats) error {
	if err := s.sendQuery("BEGIN"); err != nil {
		return err
	}
	if err := s.forward(); err != nil {
		return err
	}
	// Both responses are numbered from 1: BEGIN's is read first.
	s.backend.Sequence = 1
	p, err := s.backend.ReadPacket()
	if err != nil || len(p) == 0 || p[0] != mysqlwire.MarkOK && p[0] != mysqlwire.MarkErr {
		return errBackendLost
	}
	var beginErr *mysql.MyError
	if p[0] == mysqlwire.MarkErr {
		beginErr = mysqlwire.ParseErr(p)
	}
	s.backend.Sequence = 1
	s.sink = beginErr != nil
	err = s.relayQueryResponse(rs)
	s.sink = false
	if err != nil {
		return err
	}
	if rs.haveStat {
		s.setStatus(rs.status)
	}
	if beginErr != nil {
		rs.err = beginErr
		if err := s.client.writeError(beginErr); err != nil {
			return errClientGone
		}
	}
	return nil
}

// sendQuery sends the proxy's own COM_QUERY to the backend, as a new
// command; the caller reads the response.
func (s *session) sendQuery(sql string) error {
	s.backend.ResetSequence()
	if err := s.backend.WritePacket(append(append(newPacket(len(sql)+1), mysql.COM_QUERY), sql...)); err != nil {
		return errBackendLost
	}
	return nil
}

// refreshDB asks the backend for the current database.
func (s *session) refreshDB() {
	r, err := s.backend.Execute("SELECT DATABASE()")
	if err != nil {
		return
	}
	defer r.Close()
	db, _ := r.GetString(0, 0)
	s.db = strings.Clone(db) // go-mysql's string points into a pooled buffer
}

// changeUser handles COM_CHANGE_USER: authenticate the new user against the
// proxy's users with the session's scramble, then bind a fresh backend
// connection as that user (which resets all session state, as the command
// does on a server). A refused change keeps the user, but not the rest of
// the session (see clearRefusedChange).
func (s *session) changeUser(p []byte) error {
	name, pos, ok := mysqlwire.ReadNulString(p, 0)
	if !ok {
		return s.protocolError()
	}
	var auth []byte
	if s.client.caps&mysql.CLIENT_SECURE_CONNECTION != 0 {
		if pos >= len(p) || pos+1+int(p[pos]) > len(p) {
			return s.protocolError()
		}
		auth = p[pos+1 : pos+1+int(p[pos])]
		pos += 1 + int(p[pos])
	} else {
		var a string
		if a, pos, ok = mysqlwire.ReadNulString(p, pos); !ok {
			return s.protocolError()
		}
		auth = []byte(a)
	}
	db, pos, ok := mysqlwire.ReadNulString(p, pos)
	if !ok {
		return s.protocolError()
	}
	collation := s.params.collation
	if pos+2 <= len(p) {
		collation = p[pos]
		pos += 2
	}
	plugin := mysql.AUTH_NATIVE_PASSWORD
	if s.client.caps&mysql.CLIENT_PLUGIN_AUTH != 0 && pos < len(p) {
		if plugin, pos, ok = mysqlwire.ReadNulString(p, pos); !ok {
			plugin = string(p[pos:])
		}
	}
	var attrs map[string]string
	if s.client.caps&mysql.CLIENT_CONNECT_ATTRS != 0 && pos < len(p) {
		attrs, _ = parseConnAttrs(p[pos:])
	}
	oldUser, oldParams, old := s.user, s.params, s.backend
	if err := s.authenticate(name, plugin, auth); err != nil {
		var me *mysql.MyError
		if errors.As(err, &me) {
			return s.afterRefusedChange() // (the ERR is written)
		}
		return errClientGone
	}
	s.srv.unregister(s)
	s.backend = nil
	s.params = backendParams{user: s.user.Name, password: s.user.Password, db: db, collation: collation,
		caps: s.client.caps, extCaps: s.client.extCaps, attrs: attrs}
	if err := s.bindBackend(context.Background()); err != nil {
		// The backend refused the new user or could not be reached (the
		// ERR is written): keep the old one.
		s.user, s.params, s.backend = oldUser, oldParams, old
		s.srv.registerBackend(s)
		return s.afterRefusedChange()
	}
	s.srv.pool.release(old, !s.usedXA)
	s.usedXA = false
	s.db = db
	s.stateReset()
	return s.client.writePacket(mysqlwire.AppendOK(newPacket(16), mysqlwire.OK{Status: s.status}))
}

// afterRefusedChange does to the session what the backend's server does
// when it refuses a COM_CHANGE_USER. Both clear a session before they
// authenticate the change, so its transaction is rolled back either way.
// MySQL then ends the connection (error 1873, "... Disconnecting"), and so
// does the proxy; MariaDB keeps it, cleared (see clearRefusedChange).
// Keeping the session as it was would let a later COMMIT commit what a
// direct client's COMMIT would not.
func (s *session) afterRefusedChange() error {
	if !keepsRefusedChange(s.backend.GetServerVersion()) {
		return errSessionEnds
	}
	if err := s.clearRefusedChange(); err != nil {
		s.log.Warn("could not clear the session after a refused change of user; closing it", "conn", s.id, "err", err)
		return errSessionEnds
	}
	return nil
}

// keepsRefusedChange says whether a server of this version keeps a
// connection whose COM_CHANGE_USER it refused: MariaDB does, MySQL does not.
func keepsRefusedChange(serverVersion string) bool {
	return strings.Contains(serverVersion, "MariaDB")
}

// clearRefusedChange clears the session as MariaDB does after a refused
// COM_CHANGE_USER: the transaction rolls back, temporary tables, user
// variables and prepared statements go, and session variables return to
// their global values, while the user, the current database and the
// character set stay. The backend connection is reset
// (COM_RESET_CONNECTION keeps its user and database) and given back the
// character set it had.
func (s *session) clearRefusedChange() error {
	bc := s.backend
	r, err := bc.Execute("SELECT " + charsetVars)
	if err != nil {
		return err
	}
	cs := readCharset(r, 0)
	if err := resetConnection(bc); err != nil {
		return err
	}
	if r, err = bc.Execute(cs.restoreStatement()); err != nil {
		return err
	}
	s.setStatus(r.Status)
	s.stateReset()
	return nil
}

// mayBeXA reports whether sql may hold an XA statement: its first keyword
// is XA, or it is a request of several statements that mentions XA.
func mayBeXA(sql string) bool {
	if strings.EqualFold(plugins.FirstKeyword(sql), "XA") {
		return true
	}
	return strings.Contains(sql, ";") && strings.Contains(strings.ToUpper(sql), "XA ")
}

// stateReset follows a reset of the session's state in the backend: the
// proxy forgets its prepared statements and ends its account of the
// transaction (rolled back), the plugins' session state starts afresh, and
// the plugins are told, so what they hold for the transaction (write
// intents) ends too.
func (s *session) stateReset() {
	clear(s.stmts)
	s.tx.reset()
	s.st.Session = &plugins.SessionState{}
	s.srv.chain.Conn(plugins.ConnEvent{Kind: plugins.ConnReset, ConnID: s.id, User: s.user.Name, Remote: s.client.raw.RemoteAddr()})
}

func (s *session) protocolError() error {
	_ = s.client.writeError(mysql.NewError(mysql.ER_MALFORMED_PACKET, "Malformed communication packet"))
	_ = s.client.flush()
	return errClientGone
}

// answerWriter writes a plugin's answer to the client.
type answerWriter struct {
	s        *session
	binary   bool
	err      *mysql.MyError
	rows     uint64
	affected uint64
}

func (w *answerWriter) WritePacket(payload []byte) error {
	if err := w.s.client.writePayload(payload); err != nil {
		return errClientGone
	}
	return nil
}

// Status is the session's state only (see sessionStatusFlags): what the
// backend said about its last answer does not describe this one.
func (w *answerWriter) Status() uint16 { return w.s.status }

func (w *answerWriter) SetStatus(status uint16) { w.s.setStatus(status) }

func (w *answerWriter) Rows(n uint64) { w.rows = n }

func (w *answerWriter) ExtendedMetadata() bool {
	return w.s.client.extCaps&mariadbExtendedMetadata != 0
}

// ReportsProgress implements plugins.ProgressWriter.
func (w *answerWriter) ReportsProgress() bool { return w.s.client.extCaps&mariadbProgress != 0 }

// Progress implements plugins.ProgressWriter: the packet MariaDB sends
// during a long ALTER TABLE, flushed at once.
func (w *answerWriter) Progress(stage, maxStage int, percent float64, info string) error {
	if !w.ReportsProgress() {
		return nil
	}
	if err := w.s.client.writePacket(appendProgress(newPacket(16+len(info)), stage, maxStage, percent, info)); err != nil {
		return errClientGone
	}
	if err := w.s.client.flush(); err != nil {
		return errClientGone
	}
	return nil
}

func (w *answerWriter) WriteError(e *mysql.MyError) error {
	w.err = e
	if err := w.s.client.writeError(e); err != nil {
		return errClientGone
	}
	return nil
}

func (w *answerWriter) WriteResult(r *mysql.Result) error {
	c := w.s.client
	status := w.s.status
	if r == nil || r.Resultset == nil {
		var affected, insertID uint64
		var warnings uint16
		if r != nil {
			affected, insertID, warnings = r.AffectedRows, r.InsertId, r.Warnings
		}
		w.affected = affected
		ok := mysqlwire.OK{AffectedRows: affected, LastInsertID: insertID, Status: status, Warnings: warnings}
		if err := c.writePacket(mysqlwire.AppendOK(newPacket(16), ok)); err != nil {
			return errClientGone
		}
		return nil
	}
	rs := r.Resultset
	b := mysqlwire.AppendLenEncInt(newPacket(9), uint64(len(rs.Fields)))
	if err := c.writePacket(b); err != nil {
		return errClientGone
	}
	for _, f := range rs.Fields {
		def := f.Dump()
		if w.ExtendedMetadata() {
			def = withEmptyExtendedMetadata(def)
		}
		if err := c.writePacket(append(newPacket(64), def...)); err != nil {
			return errClientGone
		}
	}
	if err := c.writePacket(mysqlwire.AppendEOF(newPacket(5), 0, status)); err != nil {
		return errClientGone
	}
	for _, row := range rs.RowDatas {
		if err := c.writePacket(append(newPacket(len(row)), row...)); err != nil {
			return errClientGone
		}
	}
	w.rows = uint64(len(rs.RowDatas))
	if err := c.writePacket(mysqlwire.AppendEOF(newPacket(5), r.Warnings, status)); err != nil {
		return errClientGone
	}
	return nil
}

func hostOf(a net.Addr) string {
	if a == nil {
		return ""
	}
	if _, ok := a.(*net.UnixAddr); ok {
		return "localhost" // as MySQL names a client on its socket
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}
