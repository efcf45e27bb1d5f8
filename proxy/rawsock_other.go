//go:build !linux

package proxy

import "net"

// newRawSocket is the identity where raw socket calls are not implemented.
func newRawSocket(c net.Conn) net.Conn { return c }
