package proxy

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// rawSocket reads and writes a client's or the backend's socket with raw
// system calls, without the Go runtime's entersyscall/exitsyscall around
// them.
//
// Why: a cached answer's one write to a loopback client wakes the client,
// and the kernel usually switches to it before the write returns. To the
// runtime the goroutine is then "in a system call" for the client's whole
// time slice, so sysmon hands its P to another thread (a futex wake and a
// context switch) and keeps waking every 20 µs to look for more. On a
// 2-core VM that bookkeeping costs as much as the cache's own work per
// point select. The socket is non-blocking, so a raw call never blocks:
// when it would (EAGAIN), RawConn parks the goroutine on the poller as
// net.Conn does, with the connection's deadlines.
type rawSocket struct {
	net.Conn
	rc syscall.RawConn

	// The call in progress in each direction, under that direction's
	// lock; the callbacks are method values bound once, so a call does not
	// allocate a closure.
	rmu, wmu  sync.Mutex
	r, w      rawCall
	readFunc  func(uintptr) bool
	writeFunc func(uintptr) bool
}

// rawCall is one Read or Write: its buffer, the bytes done and the error.
type rawCall struct {
	p   []byte
	n   int
	err error // from the system call itself
}

// result ends a call: the bytes done and what went wrong, as net.Conn says it.
func (c *rawCall) result(op string, err error) (int, error) {
	n, callErr := c.n, c.err
	*c = rawCall{}
	switch {
	case err != nil:
		return n, err // closed, or the deadline passed
	case callErr != nil:
		return n, os.NewSyscallError(op, callErr)
	}
	return n, nil
}

// newRawSocket wraps a plain TCP or Unix socket; any other conn (TLS, a
// test's pipe) is returned as it is. The socket must stay non-blocking, as
// Go opens it: never call File() on it (that makes it blocking, and a raw
// read would then hold its P, and stop the world, until data came).
func newRawSocket(c net.Conn) net.Conn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	switch c.(type) {
	case *net.TCPConn, *net.UnixConn:
	default:
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	s := &rawSocket{Conn: c, rc: rc}
	s.readFunc = s.tryRead
	s.writeFunc = s.tryWrite
	return s
}

func (s *rawSocket) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.rmu.Lock()
	defer s.rmu.Unlock()
	s.r.p = p
	n, err := s.r.result("read", s.rc.Read(s.readFunc))
	if n == 0 && err == nil {
		return 0, io.EOF
	}
	return n, err
}

// tryRead makes one read; false means the socket had nothing (wait).
func (s *rawSocket) tryRead(fd uintptr) bool {
	for {
		n, e := sysRead(fd, s.r.p)
		switch e {
		case 0:
			s.r.n = n
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		s.r.err = e
		return true
	}
}

func (s *rawSocket) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.w.p = p
	return s.w.result("write", s.rc.Write(s.writeFunc))
}

// tryWrite writes what is left of the buffer; false means the socket's
// buffer is full (wait, then go on from w.n).
func (s *rawSocket) tryWrite(fd uintptr) bool {
	for s.w.n < len(s.w.p) {
		n, e := sysWrite(fd, s.w.p[s.w.n:])
		switch {
		case e == 0 && n > 0:
			s.w.n += n
		case e == 0: // a stream socket never takes nothing without an error
			s.w.err = io.ErrUnexpectedEOF
			return true
		case e == syscall.EINTR:
		case e == syscall.EAGAIN:
			return false
		default:
			s.w.err = e
			return true
		}
	}
	return true
}

// sysRead and sysWrite are the raw calls themselves, in every build. The race
// detector cannot see what a raw call does, so they tell it what package
// syscall's Read and Write would (rawsock_race.go); other builds compile
// those calls away.

func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e == 0 {
		raceRead(p[:n])
	}
	return int(n), e
}

func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	raceWriting()
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e == 0 {
		raceWrote(p[:n])
	}
	return int(n), e
}
