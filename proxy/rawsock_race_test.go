//go:build linux && race

package proxy

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// raceChild runs this test binary's test named run in a child process with
// mode in its environment and returns what it printed: a race the detector
// reports fails the child, which must not fail this process.
func raceChild(t *testing.T, run, mode string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+run+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "TABLEPROXY_RAWSOCK_RACE_CHILD="+mode)
	out, _ := cmd.CombinedOutput()
	return string(out)
}

const raceReport = "WARNING: DATA RACE"

// Why rawsock_race.go exists: a raw read, with nothing told to the race
// detector, of bytes another goroutine wrote through a plain net.Conn
// makes the detector report the writer's earlier work as racing with what
// the reader does next. The same exchange through rawSocket is clean
// (TestRawSocketReadIsSynchronisation). Should a Go release teach the
// detector raw system calls, this test fails and the annotations can go.
func TestRawSocketRaceDetectorNeedsTheAnnotations(t *testing.T) {
	if os.Getenv("TABLEPROXY_RAWSOCK_RACE_CHILD") == "unannotated" {
		rs, peer := tcpPair(t)
		var sent int
		go func() {
			sent = 42
			_, _ = peer.Write([]byte{1})
		}()
		var b [1]byte
		var n uintptr
		err := rs.rc.Read(func(fd uintptr) bool {
			var e syscall.Errno
			n, _, e = syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), 1)
			return e != syscall.EAGAIN
		})
		if err != nil || n != 1 {
			t.Fatalf("raw read: %d bytes, %v", n, err)
		}
		if sent != 42 {
			t.Fatal("the write's effects were not visible after its read")
		}
		return
	}
	out := raceChild(t, "TestRawSocketRaceDetectorNeedsTheAnnotations", "unannotated")
	if !strings.Contains(out, raceReport) {
		t.Fatalf("an unannotated raw read raised no race report; the annotations may no longer be needed:\n%s", out)
	}
}

// The detector also sees the buffers of the real path: a goroutine that
// changes a buffer while rawSocket writes it is reported, as it would be
// for a net.Conn.
func TestRawSocketRaceDetectorSeesTheBuffers(t *testing.T) {
	if os.Getenv("TABLEPROXY_RAWSOCK_RACE_CHILD") == "buffer" {
		rs, peer := tcpPair(t)
		buf := []byte("ping")
		done := make(chan error, 1)
		go func() {
			_, err := rs.Write(buf)
			done <- err
		}()
		buf[0] = 'P' // races with the write
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadFull(peer, make([]byte, len(buf)))
		return
	}
	out := raceChild(t, "TestRawSocketRaceDetectorSeesTheBuffers", "buffer")
	if !strings.Contains(out, raceReport) || !strings.Contains(out, "rawSocket).Write") {
		t.Fatalf("a buffer changed during rawSocket.Write raised no race report naming the write:\n%s", out)
	}
}
