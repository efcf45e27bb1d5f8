//go:build linux && race

package proxy

import (
	"os"
	"runtime"
	"syscall"
	"unsafe"
)

// What package syscall's Read and Write tell the race detector, said for
// rawSocket's raw calls: the kernel wrote the bytes a read returned and read
// the bytes a write took, and every write happens before every later
// successful read (syscall's ioSync, so that a write through a plain
// net.Conn orders before a rawSocket's read of its bytes, and the other way
// round). Without the last, a goroutine that reads what another goroutine
// of the same process sent is reported as racing with it
// (TestRawSocketRaceDetectorNeedsTheAnnotations).
//
// ioSync is syscall's own and private, so it is reached through syscall
// itself, with calls that do nothing else: Write releases it before it
// looks at the descriptor (-1 fails at once), and a read of nothing from
// /dev/null acquires it.

var raceDevNull = func() int {
	fd, err := syscall.Open(os.DevNull, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		panic("proxy: the race build needs " + os.DevNull + ": " + err.Error())
	}
	return fd
}()

func raceRead(p []byte) {
	if len(p) > 0 {
		runtime.RaceWriteRange(unsafe.Pointer(&p[0]), len(p))
	}
	_, _ = syscall.Read(raceDevNull, nil)
}

func raceWriting() { _, _ = syscall.Write(-1, nil) }

func raceWrote(p []byte) {
	if len(p) > 0 {
		runtime.RaceReadRange(unsafe.Pointer(&p[0]), len(p))
	}
}
