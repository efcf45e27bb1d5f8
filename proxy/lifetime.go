package proxy

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"tableproxy/internal/mysqlwire"
)

// A session's connections live and die together, as a direct client's one
// connection does: when the backend closes the session's connection while
// the client is idle (wait_timeout, KILL, a restart), the client's is
// closed too, right after the backend's last packet, so that its driver
// sees a dead connection before it reuses it, exactly as it would directly;
// and when the client goes away while a statement runs, the statement is
// killed rather than left to run for nobody.
//
// Neither side can be watched by the session's own goroutine, which blocks
// on one socket at a time. A watcher goroutine per phase would cost a
// goroutine start, a deadline and a wake-up for every statement, which a
// busy session (tens of thousands of statements a second) must not pay.
// So the session only publishes its phase, with the atomic operations it
// made anyway, and one sweeper per server (lifetimeSweep) arms a watcher
// for the few sessions it finds in the same phase on two ticks in a row:
// idle ones get a watcher on the backend socket, busy ones (a long
// statement) one on the client socket. Each watcher waits in the Go
// runtime's netpoller, like any blocked Read, so it costs no system call
// while nothing happens. The session disarms it when it leaves the phase,
// by setting a read deadline in the past (no system call either: the
// runtime's poller timer) and waiting for the watcher to return.

// The low bits of session.phase say what the session is doing; the bits
// above count its phase changes, so that the sweeper can tell a session
// that stayed idle since its last tick from one that ran statements in
// between.
const (
	phaseBusy         = 0 // handling a command
	phaseIdle         = 1 // waiting for the client's next command
	phaseIdleWatched  = 2 // idle, with a watcher on the backend socket
	phaseBusyWatched  = 3 // busy, with a watcher on the client socket
	phaseBusyReading  = 4 // busy, reading the client (LOAD DATA LOCAL): not watched
	phaseMask         = 7
	phaseCountStep    = 8
	lifetimeSweepTick = 250 * time.Millisecond
)

// phaseWatch is what a session's watcher reports when it returns.
type phaseWatch struct {
	done chan struct{} // one send per armed watcher
	// Set by the watcher before it sends on done.
	lost  bool   // the backend closed the connection
	final []byte // its last packet, an ERR, when it sent one before closing
	reset bool   // it reset the connection rather than closing it in order
}

// enterPhase moves the session to phase p (phaseBusy, phaseIdle or
// phaseBusyReading), disarming a watcher armed in the phase it leaves. It
// returns false when the backend watcher found the connection closed: the
// session must end.
func (s *session) enterPhase(p uint64) bool {
	next := (s.phaseNow&^phaseMask + phaseCountStep) | p
	if s.phase.CompareAndSwap(s.phaseNow, next) {
		s.phaseNow = next
		return true
	}
	// The sweeper armed a watcher (the only other writer of phase).
	alive := true
	switch s.phase.Load() & phaseMask {
	case phaseIdleWatched:
		alive = s.disarm(s.backend.Conn.Conn)
		// The watcher may have woken the client's read; nothing else
		// sets a read deadline on it while the session runs.
		_ = s.client.raw.SetReadDeadline(time.Time{})
	case phaseBusyWatched:
		s.disarm(s.client.raw)
	}
	s.phase.Store(next)
	s.phaseNow = next
	return alive
}

// disarm stops the watcher reading conn and waits for it; it returns false
// when the watcher found the backend gone.
func (s *session) disarm(conn net.Conn) bool {
	_ = conn.SetReadDeadline(time.Now())
	<-s.watch.done
	_ = conn.SetReadDeadline(time.Time{})
	return !s.watch.lost
}

// isIdle says whether the session waits for its client (for Shutdown).
func (s *session) isIdle() bool {
	p := s.phase.Load() & phaseMask
	return p == phaseIdle || p == phaseIdleWatched
}

// lifetimeSweep arms the watchers of the sessions that stayed in one phase
// for a whole tick, until stop is closed.
func (s *Server) lifetimeSweep(stop <-chan struct{}) {
	t := time.NewTicker(lifetimeSweepTick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			s.mu.Lock()
			for _, e := range s.sessions {
				e.s.sweep(e)
			}
			s.mu.Unlock()
		}
	}
}

// sweep arms a watcher when the session is in the phase it was in at the
// previous tick. Called by the sweeper only (which alone uses swept), with
// the server's lock held: e, the session's entry, is what the watcher
// works on, not the session's own fields, which the session may change
// meanwhile (COM_CHANGE_USER binds another backend connection).
func (s *session) sweep(e *sessionEntry) {
	p := s.phase.Load()
	seen := s.swept
	s.swept = p
	if p != seen {
		return
	}
	switch p & phaseMask {
	case phaseIdle:
		if s.phase.CompareAndSwap(p, p&^phaseMask|phaseIdleWatched) {
			go s.watchBackend(e.backend)
		}
	case phaseBusy:
		if s.phase.CompareAndSwap(p, p&^phaseMask|phaseBusyWatched) {
			go s.watchClient(*e)
		}
	}
}

// watchBackend waits, while the client is idle, for the backend to send
// anything or close the connection. An idle backend connection has nothing
// to say: whatever comes is its last word (MariaDB and MySQL send an ERR
// for wait_timeout or KILL before they close, or just close). It reads
// below go-mysql's packet layer, whose buffer is empty between responses,
// and through TLS when the connection has it.
func (s *session) watchBackend(backend net.Conn) {
	w := &s.watch
	w.lost, w.final, w.reset = readLastWords(backend)
	if w.lost {
		// Wake the session's read of the client, which then forwards
		// the last packet and closes the client's connection.
		s.log.Info("backend closed an idle session's connection", "conn", s.id)
		_ = s.client.raw.SetReadDeadline(time.Now())
	}
	w.done <- struct{}{}
}

// readLastWords reads from an idle connection until it closes or its read
// deadline passes (a disarm). lost says the peer spoke or closed; final is
// the ERR packet it sent first, if it sent a whole one; reset says it
// reset the connection (MariaDB ends a session idle past wait_timeout so).
func readLastWords(conn net.Conn) (lost bool, final []byte, reset bool) {
	var buf []byte
	tmp := make([]byte, 512)
	for {
		n, err := conn.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if isErrPacket(buf) {
			return true, buf, false
		}
		if err != nil {
			if len(buf) == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
				return false, nil, false // disarmed
			}
			return true, nil, errors.Is(err, syscall.ECONNRESET)
		}
		if len(buf) > 64<<10 {
			return true, nil, false // not a final ERR: say nothing of it
		}
	}
}

// isErrPacket says whether b is exactly one whole ERR packet.
func isErrPacket(b []byte) bool {
	if len(b) < mysqlwire.HeaderLen+1 {
		return false
	}
	n := mysqlwire.PayloadLen(b)
	return len(b) == mysqlwire.HeaderLen+n && b[mysqlwire.HeaderLen] == mysqlwire.MarkErr
}

// endIdleLost ends a session whose backend connection closed while it was
// idle: the backend's last packet reaches the client, then the client's
// connection closes (serveConn closes it), as the backend's own would.
//
// A backend that reset its connection has the client's reset too: a
// client that writes its next statement to a reset connection is told
// at once that the server has gone away (the mariadb client's 2006), and
// may reconnect and send it again; written to one closed in order, the
// statement seems sent, and the client can only report the connection
// lost during the query (2013).
func (s *session) endIdleLost() {
	if f := s.watch.final; len(f) > 0 {
		_ = s.client.raw.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = s.client.buf.Write(f)
		_ = s.client.flush()
		return
	}
	if s.watch.reset {
		resetOnClose(s.client.raw)
	}
}

// resetOnClose makes conn's Close reset the connection instead of
// closing it in order; through TLS, the TCP connection under it.
func resetOnClose(conn net.Conn) {
	if tc, ok := conn.(interface{ NetConn() net.Conn }); ok {
		conn = tc.NetConn()
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
}

// watchClient waits, while a statement runs, for the client to hang up.
// When it does, the statement is killed on the backend (KILL QUERY), so its
// thread is freed now instead of when the statement ends; the relay then
// gets the backend's "interrupted" error and ends the session as a lost
// client.
func (s *session) watchClient(e sessionEntry) {
	if waitHangup(s.client.raw) && s.srv.stillBound(s, e.backendID) {
		s.log.Info("client went away during a statement; killing it", "conn", s.id, "backend_thread", e.backendID)
		s.srv.killQuery(&e.params, e.backendID)
	}
	s.watch.lost = false
	s.watch.done <- struct{}{}
}

// killQuery runs KILL QUERY for a backend thread on a connection of its
// own, as the session's user (who may always kill their own statements).
func (s *Server) killQuery(params *backendParams, thread uint32) {
	ctx, cancel := context.WithTimeout(context.Background(), s.pool.cfg.ConnectTimeout)
	defer cancel()
	bc, err := s.pool.dial(ctx, params, params.key())
	if err != nil {
		s.log.Warn("cannot kill the statement of a gone client", "backend_thread", thread, "err", err)
		return
	}
	defer bc.Conn.Close()
	_ = bc.Conn.Conn.SetDeadline(time.Now().Add(s.pool.cfg.ConnectTimeout))
	if _, err := bc.Execute("KILL QUERY " + strconv.FormatUint(uint64(thread), 10)); err != nil {
		s.log.Warn("cannot kill the statement of a gone client", "backend_thread", thread, "err", err)
	}
}

// stillBound says whether backend thread is still the session's: one
// that a COM_CHANGE_USER gave up may serve another session by now.
func (s *Server) stillBound(sess *session, thread uint32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.sessions[sess.id]
	return ok && e.s == sess && e.backendID == thread
}
