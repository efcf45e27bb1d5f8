package proxy

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// acceptCanRetry tells an Accept error that passes (a timeout, a client
// gone before it was accepted, the process or system out of descriptors or
// buffers) from a closed or broken listener.
func acceptCanRetry(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// listenSocket binds a Unix socket at path for clients on the same host (a
// sidecar's application, say). A lock file beside it (path + ".lock", as
// mysqld keeps one) is held for the listener's life, so that two proxies
// never both judge the socket file stale and take it from each other. A
// socket file left by a proxy that died is replaced; one that a live server
// accepts on, or a file that is not a socket, is left alone and refused.
func listenSocket(path string) (net.Listener, error) {
	lock, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another tableproxy holds %s.lock", path)
		}
		return nil, fmt.Errorf("lock %s.lock: %w", path, err)
	}
	ln, err := bindSocket(path)
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	return &socketListener{Listener: ln, lock: lock}, nil
}

// socketListener is a Unix listener with the lock that makes its socket
// file this proxy's. Closing it removes the file, then frees the lock.
type socketListener struct {
	net.Listener
	lock *os.File
	once sync.Once
}

func (l *socketListener) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() { _ = l.lock.Close() })
	return err
}

// bindSocket binds path, replacing a socket file nobody accepts on.
func bindSocket(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			_ = c.Close()
			return nil, fmt.Errorf("another server is listening on %s", path)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("cannot tell whether %s is in use: %w", path, err)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	// Any local user may connect, as to mysqld's socket: the MySQL login is
	// the access check, not the file's mode. (By path: the directory must
	// be writable by the proxy's user only, as /run/mysqld is mysqld's.)
	if err := os.Chmod(path, 0o777); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ln, nil
}
