package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection, the first
// wrapped as the proxy wraps a client's socket.
func tcpPair(t *testing.T) (*rawSocket, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := <-accepted
	if c == nil {
		t.Fatal("accept failed")
	}
	rs, ok := newRawSocket(c).(*rawSocket)
	if !ok {
		t.Fatalf("a TCP conn was not wrapped: %T", newRawSocket(c))
	}
	t.Cleanup(func() { rs.Close(); peer.Close() })
	return rs, peer
}

// A write far larger than the socket buffers fills them (EAGAIN), waits on
// the poller and resumes where it stopped; a concurrent read on the same
// socket keeps its own state.
func TestRawSocketLargeWriteAndConcurrentRead(t *testing.T) {
	rs, peer := tcpPair(t)
	big := make([]byte, 16<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	var n int
	var werr error
	go func() {
		defer wg.Done()
		n, werr = rs.Write(big)
	}()
	var got []byte
	var rerr error
	go func() {
		defer wg.Done()
		got, rerr = io.ReadAll(io.LimitReader(peer, int64(len(big))))
		if rerr == nil {
			_, rerr = peer.Write([]byte("pong"))
		}
	}()
	buf := make([]byte, 8)
	m, err := io.ReadFull(rs, buf[:4])
	wg.Wait()
	if werr != nil || n != len(big) {
		t.Fatalf("write: %d of %d bytes, %v", n, len(big), werr)
	}
	if rerr != nil || !bytes.Equal(got, big) {
		t.Fatalf("the peer read %d bytes (%v); equal: %v", len(got), rerr, bytes.Equal(got, big))
	}
	if err != nil || string(buf[:m]) != "pong" {
		t.Fatalf("read %q, %v", buf[:m], err)
	}
}

// Deadlines, the peer's close and our own close read as they do on a
// net.Conn: a timeout error, io.EOF, net.ErrClosed.
func TestRawSocketDeadlineEOFAndClose(t *testing.T) {
	rs, peer := tcpPair(t)
	buf := make([]byte, 16)

	_ = rs.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := rs.Read(buf)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want a timeout", err)
	}
	_ = rs.SetReadDeadline(time.Time{})

	if _, err := peer.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	peer.Close()
	n, err := rs.Read(buf)
	if err != nil || string(buf[:n]) != "abc" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	if _, err := rs.Read(buf); err != io.EOF {
		t.Fatalf("read after the peer closed: %v, want io.EOF", err)
	}

	// Writing to a peer that has gone fails (EPIPE or ECONNRESET) instead
	// of hanging; the first write may still be accepted by the kernel.
	var werr error
	for i := 0; i < 100 && werr == nil; i++ {
		_, werr = rs.Write([]byte("after close"))
		time.Sleep(time.Millisecond)
	}
	if werr == nil {
		t.Fatal("writes to a closed peer kept succeeding")
	}

	done := make(chan error, 1)
	rs2, _ := tcpPair(t)
	go func() {
		_, err := rs2.Read(buf)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	rs2.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("a read parked while the socket closed: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a parked read did not return on close")
	}
}

// Only plain sockets are wrapped: TLS and pipes keep their own I/O.
func TestRawSocketWrapsOnlySockets(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if got := newRawSocket(a); got != a {
		t.Fatalf("a pipe was wrapped: %T", got)
	}
}

// Bytes written on one side and read through a rawSocket order what came
// before the write before what comes after the read, for the race detector
// as for the program: a -race build must not report a race here.
var sentBeforeTheWrite int

func TestRawSocketReadIsSynchronisation(t *testing.T) {
	rs, peer := tcpPair(t)
	go func() {
		sentBeforeTheWrite = 42
		_, _ = peer.Write([]byte{1})
	}()
	b := make([]byte, 1)
	if _, err := io.ReadFull(rs, b); err != nil {
		t.Fatal(err)
	}
	if sentBeforeTheWrite != 42 {
		t.Fatal("the write's effects were not visible after its read")
	}
}

// The other way round: what a goroutine did before it wrote through a
// rawSocket is visible, for the race detector too, to the goroutine that
// reads the bytes from a plain net.Conn.
var doneBeforeTheRawWrite int

func TestRawSocketWriteIsSynchronisation(t *testing.T) {
	rs, peer := tcpPair(t)
	go func() {
		doneBeforeTheRawWrite = 42
		_, _ = rs.Write([]byte{1})
	}()
	b := make([]byte, 1)
	if _, err := io.ReadFull(peer, b); err != nil {
		t.Fatal(err)
	}
	if doneBeforeTheRawWrite != 42 {
		t.Fatal("the write's effects were not visible after its read")
	}
}

// Many connections relay a stream through two rawSockets each, as a
// session relays between its client and its backend: the client's stream
// goes in through one, out through the other to an echo peer, and back the
// same way. Small send buffers and uneven read and write sizes make reads
// come short and writes fill the buffer (EAGAIN) and resume; every byte
// must come back, in order.
func TestRawSocketRelayStress(t *testing.T) {
	const conns = 8
	size := 4 << 20
	if testing.Short() {
		size = 256 << 10
	}
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i := 0; i < conns; i++ {
		front, client := tcpPair(t)
		back, echo := tcpPair(t)
		// Small send buffers only: a receive buffer far below loopback's
		// 64k MSS stalls TCP itself, rawSocket or not.
		for _, c := range []net.Conn{front.Conn, back.Conn, client, echo} {
			_ = c.(*net.TCPConn).SetWriteBuffer(8 << 10)
		}
		seed := uint32(i + 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- relayRoundTrip(front, back, client, echo, size, seed)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// relayRoundTrip sends size bytes from client through front and back to
// echo and back again, and checks what returns.
func relayRoundTrip(front, back *rawSocket, client, echo net.Conn, size int, seed uint32) error {
	want := make([]byte, size)
	x := seed
	for i := range want {
		x = x*1664525 + 1013904223
		want[i] = byte(x >> 24)
	}
	relay := func(dst, src net.Conn, seed uint32) {
		buf := make([]byte, 64<<10)
		for {
			seed = seed*1664525 + 1013904223
			n, err := src.Read(buf[:1+int(seed>>16)%len(buf)])
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				closeWrite(dst)
				return
			}
		}
	}
	go relay(back, front, seed)  // client -> echo
	go relay(front, back, ^seed) // echo -> client
	go relay(echo, echo, seed*3) // the echo peer
	go func() {
		for off := 0; off < size; {
			n := min(size-off, 1+int(seed*7919+uint32(off))%(96<<10))
			if _, err := client.Write(want[off : off+n]); err != nil {
				return
			}
			off += n
		}
		closeWrite(client)
	}()
	got, err := io.ReadAll(client)
	if err != nil {
		return err
	}
	if len(got) != size {
		return fmt.Errorf("connection %d: %d bytes came back, want %d", seed, len(got), size)
	}
	if i := firstDifference(got, want); i >= 0 {
		return fmt.Errorf("connection %d: byte %d came back as %#x, want %#x", seed, i, got[i], want[i])
	}
	return nil
}

// closeWrite sends the peer its EOF, through a rawSocket to its TCP conn.
func closeWrite(c net.Conn) {
	if rs, ok := c.(*rawSocket); ok {
		c = rs.Conn
	}
	_ = c.(*net.TCPConn).CloseWrite()
}

func firstDifference(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
