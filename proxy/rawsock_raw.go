//go:build linux && !race && !msan && !asan

package proxy

import (
	"syscall"
	"unsafe"
)

// sysRead and sysWrite are the raw calls rawSocket makes (see there).

func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	return int(n), e
}

func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	return int(n), e
}
