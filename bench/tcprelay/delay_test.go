package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// startDelayRelay relays a new listener to an echo server with delay in each
// direction and returns the relay's address.
func startDelayRelay(t *testing.T, delay time.Duration) string {
	t.Helper()
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var stats [2]delayStats
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go relay(c, echo.Addr().String(), delay, &stats,
				func(net.Conn) bool { return true }, func(net.Conn) {})
		}
	}()
	return ln.Addr().String()
}

func TestDelayRoundTrip(t *testing.T) {
	const delay = 5 * time.Millisecond
	c, err := net.Dial("tcp", startDelayRelay(t, delay))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	for i := 0; i < 5; i++ {
		start := time.Now()
		fmt.Fprintf(c, "ping %d\n", i)
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("ping %d\n", i); line != want {
			t.Fatalf("got %q, want %q", line, want)
		}
		if rtt := time.Since(start); rtt < 2*delay {
			t.Fatalf("round trip %v, want at least %v", rtt, 2*delay)
		}
	}
}

// Pipelined messages each take one round trip of delay, not one per message
// queued ahead of them, and arrive in order.
func TestDelayDoesNotThrottle(t *testing.T) {
	const (
		delay = 20 * time.Millisecond
		n     = 200
	)
	c, err := net.Dial("tcp", startDelayRelay(t, delay))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	go func() {
		for i := 0; i < n; i++ {
			fmt.Fprintf(c, "message %d\n", i)
			time.Sleep(100 * time.Microsecond)
		}
	}()
	r := bufio.NewReader(c)
	for i := 0; i < n; i++ {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("message %d\n", i); line != want {
			t.Fatalf("message %d: got %q, want %q", i, line, want)
		}
	}
	// Sending takes at least n x 100µs = 20ms; serialised delays would take
	// at least n x 2 x delay = 8s.
	if took := time.Since(start); took < 2*delay || took > 2*time.Second {
		t.Fatalf("%d pipelined messages took %v; want about %v plus sending time", n, took, 2*delay)
	}
}
