package proxy

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"
)

// listenSocket binds a Unix socket at path for clients on the same host (a
// sidecar's application, say). A socket file left behind by a proxy that
// died without removing it is replaced; one that a live server still
// accepts on, or a file that is not a socket, is left alone and refused.
func listenSocket(path string) (net.Listener, error) {
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
	// the access check, not the file's mode.
	if err := os.Chmod(path, 0o777); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ln, nil
}
