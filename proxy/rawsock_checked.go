//go:build linux && (race || msan || asan)

package proxy

import "syscall"

// Under the race detector and the sanitizers, rawSocket calls through
// package syscall, whose Read and Write tell them what the kernel read and
// wrote (and that a write happens before the read of its bytes); raw calls
// would hide that and make them report races that are not there.

func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	return max(n, 0), errnoOf(err)
}

func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), p)
	return max(n, 0), errnoOf(err)
}

func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	return syscall.EIO
}
