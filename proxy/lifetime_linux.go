package proxy

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// waitHangup waits until the peer of conn hangs up, or conn's read deadline
// passes or it is closed (false). It consumes nothing: it peeks, and the
// runtime's netpoller wakes it only when something arrives. Bytes that
// arrive before the hang-up (a pipelined command, COM_QUIT, a TLS alert)
// do not hide it: the poller is edge-triggered and also wakes on the
// hang-up behind them, which poll then reports.
func waitHangup(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var gone bool
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		for {
			n, _, e := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			switch {
			case e == unix.EINTR:
				continue
			case e == unix.EAGAIN:
				return false
			case e != nil || n == 0:
				gone = true // reset, or the peer's FIN
				return true
			}
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
			if k, _ := unix.Poll(fds, 0); k > 0 && fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0 {
				gone = true
				return true
			}
			return false
		}
	})
	return err == nil && gone
}
