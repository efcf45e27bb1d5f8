// Command floorserver is the floor of a cached read on this host: the least
// any MySQL-protocol server can do per query. bench/run.sh --cache runs
// sysbench against it beside the proxy and prints proxy/floor.
//
// It is not part of tableproxy, and it is not a correct server. The first
// time it sees a statement shape it forwards the statement once to the real
// backend (-backend), over a connection of its own, and records the complete
// answer; from then on it answers every statement of that shape by writing
// the recorded packets, in one write after one read, whatever the values in
// the statement. The answers have the packets, columns and sizes of a real
// one, so sysbench does all of its usual work, but the server does next to
// none: no parsing, one map or slice lookup, no encoding of rows. A cached
// read through the proxy cannot cost less than this, so proxy/floor says how
// much of the gap to MariaDB is the proxy's own work and how much is the
// loopback reads and writes that any server pays on this machine.
//
// The shapes: a COM_QUERY's text with digit runs (outside identifiers) and
// quoted literals replaced by '?'; a COM_STMT_PREPARE's SQL text, whose
// recorded answer is replayed under this server's own statement ids; and
// each prepared statement's COM_STMT_EXECUTE. The recorded answers are
// numbered as answers to a command with sequence id 0. An error answer is
// not recorded: the next statement of its shape is forwarded again. The one
// exception is a duplicate key, which is answered and recorded as one row
// inserted: with replayed writes the backend's rows are not what the client
// thinks (oltp_read_write's DELETE before its INSERT of the same id was
// replayed, not run). BEGIN, START TRANSACTION, COMMIT and ROLLBACK, as text
// or prepared, answer OK without reaching the backend, whose connection so
// never holds a transaction (and its locks) open between two forwarded
// statements. COM_PING, COM_INIT_DB, COM_STMT_RESET and other commands
// answer OK, COM_STMT_CLOSE and COM_STMT_SEND_LONG_DATA nothing, COM_QUIT
// closes.
//
// Clients log in as any user with any password (mysql_native_password, no
// TLS); the backend is reached as -user/-password on database -db.
//
// Usage:
//
//	floorserver -listen 127.0.0.1:6064 -backend 127.0.0.1:3307 -user sbtest -password sbtest -db sbtest
package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/internal/mysqlwire"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:6064", "address to accept clients on")
	backend := flag.String("backend", "", "host:port of the MySQL/MariaDB server whose answers are recorded (required)")
	user := flag.String("user", "sbtest", "backend user")
	password := flag.String("password", "sbtest", "backend password")
	db := flag.String("db", "sbtest", "backend database")
	flag.Parse()
	if *backend == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: floorserver -listen HOST:PORT -backend HOST:PORT [-user U] [-password P] [-db DB]")
		os.Exit(2)
	}
	log.SetPrefix("floorserver: ")
	log.SetFlags(log.LstdFlags)

	s, err := newServer(*backend, *user, *password, *db)
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("serving %s with answers recorded from %s (MySQL %s)", ln.Addr(), *backend, s.version)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		log.Printf("%v: shutting down", <-sigs)
		ln.Close()
	}()
	s.serve(ln)
	s.mu.Lock()
	log.Printf("recorded %d query shapes and %d prepared statements", len(s.queries), len(s.stmts))
	s.mu.Unlock()
}

// server holds the recorded answers, shared by all client connections.
type server struct {
	addr, user, password, db string
	version                  string // the backend's, announced to clients
	connID                   atomic.Uint32

	mu      sync.Mutex // guards the backend connection and the maps
	backend *client.Conn
	queries map[string][]byte // COM_QUERY shape -> recorded answer
	stmts   map[string]*stmt  // prepared SQL text -> statement
}

// stmt is one prepared SQL text.
type stmt struct {
	prepare   []byte // the recorded COM_STMT_PREPARE answer
	backendID uint32 // its statement id on the backend connection
	exec      []byte // the recorded COM_STMT_EXECUTE answer, once one succeeded
	txControl bool   // BEGIN, COMMIT and the like: executions answer OK
}

func newServer(addr, user, password, db string) (*server, error) {
	s := &server{addr: addr, user: user, password: password, db: db,
		queries: map[string][]byte{}, stmts: map[string]*stmt{}}
	if err := s.connect(); err != nil {
		return nil, err
	}
	s.version = s.backend.GetServerVersion()
	return s, nil
}

// connect opens the backend connection; with s.mu held once serving.
func (s *server) connect() error {
	c, err := client.Connect(s.addr, s.user, s.password, s.db, func(c *client.Conn) error {
		// Without CLIENT_DEPRECATE_EOF (go-mysql does not ask for it), as
		// the clients are served.
		c.SetCapability(mysql.CLIENT_MULTI_RESULTS | mysql.CLIENT_PS_MULTI_RESULTS)
		return nil
	})
	if err != nil {
		return fmt.Errorf("backend %s: %w", s.addr, err)
	}
	s.backend = c
	return nil
}

func (s *server) serve(ln net.Listener) {
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			log.Printf("accept: %v", err)
			continue
		}
		go func() {
			defer nc.Close()
			c := &conn{s: s, nc: nc, r: bufio.NewReaderSize(nc, 16<<10), queries: map[string][]byte{}}
			if err := c.handshake(s.connID.Add(1)); err != nil {
				log.Printf("%s: handshake: %v", nc.RemoteAddr(), err)
				return
			}
			if err := c.serve(); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				log.Printf("%s: %v", nc.RemoteAddr(), err)
			}
		}()
	}
}

// roundTrip sends one command to the backend and returns its complete
// answer, packets numbered from 1, and whether that is an error. With
// prepare, cmd is a COM_STMT_PREPARE and id is the backend's statement id.
// With s.mu held.
func (s *server) roundTrip(cmd []byte, prepare bool) (ans []byte, id uint32, isErr bool, err error) {
	if s.backend == nil {
		if err := s.connect(); err != nil {
			return nil, 0, false, err
		}
		clear(s.stmts) // their backend ids were the old connection's
	}
	s.backend.ResetSequence()
	data := make([]byte, mysqlwire.HeaderLen+len(cmd))
	copy(data[mysqlwire.HeaderLen:], cmd)
	r := recorder{c: s.backend}
	if err = s.backend.WritePacket(data); err == nil {
		if prepare {
			id, isErr, err = r.prepared()
		} else {
			isErr, err = r.result()
		}
	}
	if err != nil {
		s.backend.Close()
		s.backend = nil
		return nil, 0, false, fmt.Errorf("backend: %w", err)
	}
	return r.out, id, isErr, nil
}

// query returns the answer to a COM_QUERY of shape key, and whether it is
// recorded (and so may be replayed).
func (s *server) query(key, cmd []byte) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ans, ok := s.queries[string(key)]; ok {
		return ans, true, nil
	}
	ans := okAnswer
	if !txControl(cmd[1:]) {
		var isErr bool
		var err error
		ans, _, isErr, err = s.roundTrip(cmd, false)
		if ans, isErr = settle(ans, isErr); err != nil || isErr {
			return ans, false, err
		}
	}
	s.queries[string(key)] = ans
	return ans, true, nil
}

// prepare returns the statement of a COM_STMT_PREPARE, or nil and the
// backend's error answer.
func (s *server) prepare(cmd []byte) (*stmt, []byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.stmts[string(cmd[1:])]; ok {
		return st, st.prepare, nil
	}
	ans, id, isErr, err := s.roundTrip(cmd, true)
	if err != nil || isErr {
		return nil, ans, err
	}
	st := &stmt{prepare: ans, backendID: id, txControl: txControl(cmd[1:])}
	if st.txControl {
		st.exec = okAnswer
	}
	s.stmts[string(cmd[1:])] = st
	return st, ans, nil
}

// execute returns the answer to a COM_STMT_EXECUTE of st, and whether it is
// recorded.
func (s *server) execute(st *stmt, cmd []byte) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.exec != nil {
		return st.exec, true, nil
	}
	fwd := append([]byte(nil), cmd...)
	binary.LittleEndian.PutUint32(fwd[1:], st.backendID)
	ans, _, isErr, err := s.roundTrip(fwd, false)
	if ans, isErr = settle(ans, isErr); err != nil || isErr {
		return ans, false, err
	}
	st.exec = ans
	return ans, true, nil
}

// okAnswer answers a command with OK, as sent after sequence id 0.
var okAnswer = packet(1, okPayload)

func packet(seq byte, payload []byte) []byte {
	h := mysqlwire.Header(len(payload), seq)
	return append(h[:], payload...)
}

// settle turns a duplicate key error into one row inserted (see the
// package comment).
func settle(ans []byte, isErr bool) ([]byte, bool) {
	if isErr && len(ans) >= mysqlwire.HeaderLen+3 &&
		binary.LittleEndian.Uint16(ans[mysqlwire.HeaderLen+1:]) == mysql.ER_DUP_ENTRY {
		return packet(1, mysqlwire.AppendOK(nil, mysqlwire.OK{AffectedRows: 1, Status: mysql.SERVER_STATUS_AUTOCOMMIT})), false
	}
	return ans, isErr
}

// txControl reports whether sql begins or ends a transaction.
func txControl(sql []byte) bool {
	sql = bytes.TrimLeft(sql, " \t\r\n")
	for _, w := range []string{"BEGIN", "START TRANSACTION", "COMMIT", "ROLLBACK"} {
		if len(sql) >= len(w) && bytes.EqualFold(sql[:len(w)], []byte(w)) &&
			(len(sql) == len(w) || !identByte(sql[len(w)])) {
			return true
		}
	}
	return false
}

// recorder reads the backend's answer packets and appends them, with
// headers numbered from 1, to out.
type recorder struct {
	c   *client.Conn
	out []byte
	seq byte
}

var errMalformed = errors.New("malformed answer")

func (r *recorder) next() ([]byte, error) {
	p, err := r.c.ReadPacket()
	if err != nil {
		return nil, err
	}
	if len(p) == 0 || len(p) >= mysql.MaxPayloadLen {
		return nil, fmt.Errorf("a packet of %d bytes is not supported", len(p))
	}
	r.seq++
	h := mysqlwire.Header(len(p), r.seq)
	r.out = append(append(r.out, h[:]...), p...)
	return p, nil
}

// skip reads n packets.
func (r *recorder) skip(n int) error {
	for range n {
		if _, err := r.next(); err != nil {
			return err
		}
	}
	return nil
}

// result reads the answer to COM_QUERY or COM_STMT_EXECUTE: OK, ERR, or
// result sets (column count, definitions, EOF, rows, EOF), as many as the
// server says follow.
func (r *recorder) result() (isErr bool, err error) {
	for {
		p, err := r.next()
		if err != nil {
			return false, err
		}
		var status uint16
		switch p[0] {
		case mysqlwire.MarkErr:
			return true, nil
		case mysqlwire.MarkOK:
			ok, valid := mysqlwire.ParseOK(p)
			if !valid {
				return false, errMalformed
			}
			status = ok.Status
		case mysqlwire.MarkLocalInfil:
			return false, errors.New("LOAD DATA LOCAL is not supported")
		default:
			n, _, ok := mysqlwire.ReadLenEncInt(p)
			if !ok {
				return false, errMalformed
			}
			if err := r.skip(int(n) + 1); err != nil { // definitions and EOF
				return false, err
			}
			for {
				if p, err = r.next(); err != nil {
					return false, err
				}
				if p[0] == mysqlwire.MarkErr {
					return true, nil
				}
				if mysqlwire.IsEOF(p) {
					_, status = mysqlwire.ParseEOF(p)
					break
				}
			}
		}
		if status&mysql.SERVER_MORE_RESULTS_EXISTS == 0 {
			return false, nil
		}
	}
}

// prepared reads the answer to COM_STMT_PREPARE: OK with the statement id
// and counts, then the parameter and column definitions, each followed by
// EOF; or ERR.
func (r *recorder) prepared() (id uint32, isErr bool, err error) {
	p, err := r.next()
	if err != nil {
		return 0, false, err
	}
	if p[0] == mysqlwire.MarkErr {
		return 0, true, nil
	}
	if p[0] != mysqlwire.MarkOK || len(p) < 9 {
		return 0, false, errMalformed
	}
	id = binary.LittleEndian.Uint32(p[1:])
	for _, n := range []uint16{binary.LittleEndian.Uint16(p[7:]), binary.LittleEndian.Uint16(p[5:])} {
		if n > 0 {
			if err := r.skip(int(n) + 1); err != nil {
				return 0, false, err
			}
		}
	}
	return id, false, nil
}

// conn is one client connection, served by one goroutine.
type conn struct {
	s       *server
	nc      net.Conn
	r       *bufio.Reader
	hdr     [mysqlwire.HeaderLen]byte
	buf     []byte // the payload last read
	seq     byte   // its sequence id
	out     []byte // answers built or copied before writing
	key     []byte // the shape of the last COM_QUERY
	queries map[string][]byte
	stmts   []*connStmt // by statement id - 1
}

// connStmt is a statement the client prepared.
type connStmt struct {
	st   *stmt
	exec []byte // st.exec once recorded
}

var okPayload = mysqlwire.AppendOK(nil, mysqlwire.OK{Status: mysql.SERVER_STATUS_AUTOCOMMIT})

const serverCaps = mysql.CLIENT_LONG_PASSWORD | mysql.CLIENT_FOUND_ROWS | mysql.CLIENT_LONG_FLAG |
	mysql.CLIENT_CONNECT_WITH_DB | mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_TRANSACTIONS |
	mysql.CLIENT_SECURE_CONNECTION | mysql.CLIENT_MULTI_RESULTS | mysql.CLIENT_PS_MULTI_RESULTS |
	mysql.CLIENT_PLUGIN_AUTH

// read reads one packet into c.buf.
func (c *conn) read() ([]byte, error) {
	if _, err := io.ReadFull(c.r, c.hdr[:]); err != nil {
		return nil, err
	}
	n := mysqlwire.PayloadLen(c.hdr[:])
	if n >= mysql.MaxPayloadLen {
		return nil, errors.New("packets of 16 MiB and more are not supported")
	}
	c.seq = c.hdr[3]
	if cap(c.buf) < n {
		c.buf = make([]byte, n)
	}
	c.buf = c.buf[:n]
	_, err := io.ReadFull(c.r, c.buf)
	return c.buf, err
}

// send writes one packet with the next sequence id.
func (c *conn) send(payload []byte) error {
	h := mysqlwire.Header(len(payload), c.seq+1)
	c.out = append(append(c.out[:0], h[:]...), payload...)
	_, err := c.nc.Write(c.out)
	return err
}

func (c *conn) fail(code uint16, msg string) error {
	return c.send(mysqlwire.AppendErr(nil, &mysql.MyError{Code: code, State: "HY000", Message: msg}))
}

// replay writes a recorded answer, renumbered if the command's sequence id
// was not 0.
func (c *conn) replay(ans []byte) error {
	if c.seq != 0 {
		c.out = renumber(append(c.out[:0], ans...), c.seq+1)
		ans = c.out
	}
	_, err := c.nc.Write(ans)
	return err
}

// renumber sets the sequence ids of the packets in b from seq on.
func renumber(b []byte, seq byte) []byte {
	for i := 0; i+mysqlwire.HeaderLen <= len(b); i += mysqlwire.HeaderLen + mysqlwire.PayloadLen(b[i:]) {
		b[i+3] = seq
		seq++
	}
	return b
}

func (c *conn) handshake(id uint32) error {
	scramble := make([]byte, 20)
	rand.Read(scramble)
	for i := range scramble {
		scramble[i] = scramble[i]&0x7f | 1 // no NUL
	}
	p := append([]byte{10}, c.s.version...)
	p = binary.LittleEndian.AppendUint32(append(p, 0), id)
	p = append(append(p, scramble[:8]...), 0)
	p = binary.LittleEndian.AppendUint16(p, uint16(serverCaps&0xffff))
	p = append(p, 45) // utf8mb4_general_ci
	p = binary.LittleEndian.AppendUint16(p, mysql.SERVER_STATUS_AUTOCOMMIT)
	p = binary.LittleEndian.AppendUint16(p, uint16(serverCaps>>16))
	p = append(p, byte(len(scramble)+1), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	p = append(append(p, scramble[8:]...), 0)
	p = append(append(p, mysql.AUTH_NATIVE_PASSWORD...), 0)
	c.seq = 255 // the greeting is packet 0
	if err := c.send(p); err != nil {
		return err
	}
	resp, err := c.read()
	if err != nil {
		return err
	}
	if len(resp) < 32 || binary.LittleEndian.Uint32(resp)&mysql.CLIENT_PROTOCOL_41 == 0 {
		return errors.New("the client does not speak protocol 4.1")
	}
	// Any password will do; only the client's auth plugin matters: one
	// other than mysql_native_password is switched to it.
	caps := binary.LittleEndian.Uint32(resp)
	_, pos, ok := mysqlwire.ReadNulString(resp, 32) // user
	if ok && pos < len(resp) && caps&mysql.CLIENT_SECURE_CONNECTION != 0 {
		pos += 1 + int(resp[pos])
	} else if ok {
		_, pos, ok = mysqlwire.ReadNulString(resp, pos)
	}
	if ok && caps&mysql.CLIENT_CONNECT_WITH_DB != 0 {
		_, pos, ok = mysqlwire.ReadNulString(resp, pos)
	}
	plugin := ""
	if ok && caps&mysql.CLIENT_PLUGIN_AUTH != 0 {
		plugin, _, _ = mysqlwire.ReadNulString(resp, pos)
	}
	if plugin != "" && plugin != mysql.AUTH_NATIVE_PASSWORD {
		sw := append([]byte{mysqlwire.MarkEOF}, mysql.AUTH_NATIVE_PASSWORD...)
		if err := c.send(append(append(append(sw, 0), scramble...), 0)); err != nil {
			return err
		}
		if _, err := c.read(); err != nil {
			return err
		}
	}
	return c.send(okPayload)
}

func (c *conn) serve() error {
	for {
		p, err := c.read()
		if err != nil {
			return err
		}
		if len(p) == 0 {
			return errors.New("empty command packet")
		}
		switch p[0] {
		case mysql.COM_STMT_EXECUTE:
			err = c.execute(p)
		case mysql.COM_QUERY:
			err = c.query(p)
		case mysql.COM_STMT_PREPARE:
			err = c.prepare(p)
		case mysql.COM_STMT_CLOSE:
			if len(p) >= 5 {
				if id := binary.LittleEndian.Uint32(p[1:]); id >= 1 && int(id) <= len(c.stmts) {
					c.stmts[id-1] = nil
				}
			}
		case mysql.COM_STMT_SEND_LONG_DATA:
		case mysql.COM_QUIT:
			return nil
		default: // COM_PING, COM_INIT_DB, COM_STMT_RESET, ...
			err = c.send(okPayload)
		}
		if err != nil {
			return err
		}
	}
}

func (c *conn) query(p []byte) error {
	c.key = shape(c.key[:0], p[1:])
	if ans, ok := c.queries[string(c.key)]; ok {
		return c.replay(ans)
	}
	ans, recorded, err := c.s.query(c.key, p)
	if err != nil {
		return c.fail(mysql.ER_UNKNOWN_ERROR, err.Error())
	}
	if recorded {
		c.queries[string(c.key)] = ans
	}
	return c.replay(ans)
}

func (c *conn) prepare(p []byte) error {
	st, ans, err := c.s.prepare(p)
	if err != nil {
		return c.fail(mysql.ER_UNKNOWN_ERROR, err.Error())
	}
	if st == nil {
		return c.replay(ans)
	}
	c.stmts = append(c.stmts, &connStmt{st: st})
	c.out = renumber(append(c.out[:0], ans...), c.seq+1)
	binary.LittleEndian.PutUint32(c.out[mysqlwire.HeaderLen+1:], uint32(len(c.stmts)))
	_, err = c.nc.Write(c.out)
	return err
}

func (c *conn) execute(p []byte) error {
	var cs *connStmt
	if len(p) >= 5 {
		if id := binary.LittleEndian.Uint32(p[1:]); id >= 1 && int(id) <= len(c.stmts) {
			cs = c.stmts[id-1]
		}
	}
	if cs == nil {
		return c.fail(mysql.ER_UNKNOWN_STMT_HANDLER, "unknown prepared statement")
	}
	if cs.exec != nil {
		return c.replay(cs.exec)
	}
	ans, recorded, err := c.s.execute(cs.st, p)
	if err != nil {
		return c.fail(mysql.ER_UNKNOWN_ERROR, err.Error())
	}
	if recorded {
		cs.exec = ans
	}
	return c.replay(ans)
}

// shape appends q to dst with each quoted literal and each run of digits
// that does not continue an identifier (sbtest1 stays) replaced by '?'.
func shape(dst, q []byte) []byte {
	for i := 0; i < len(q); {
		ch := q[i]
		switch {
		case ch == '\'' || ch == '"':
			j := i + 1
			for ; j < len(q); j++ {
				if q[j] == '\\' {
					j++
				} else if q[j] == ch {
					if j+1 < len(q) && q[j+1] == ch {
						j++
						continue
					}
					break
				}
			}
			dst = append(dst, '?')
			i = j + 1
		case ch >= '0' && ch <= '9' && (i == 0 || !identByte(q[i-1])):
			for i < len(q) && q[i] >= '0' && q[i] <= '9' {
				i++
			}
			dst = append(dst, '?')
		default:
			dst = append(dst, ch)
			i++
		}
	}
	return dst
}

func identByte(b byte) bool {
	return b == '_' || b == '$' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b >= 0x80
}
