package main

import (
	"encoding/binary"
	"net"
	"reflect"
	"testing"
	"time"
)

// followers starts k followers in this process and returns their
// addresses and state.
func followers(t *testing.T, k int) ([]string, []*follower, []net.Listener) {
	t.Helper()
	var addrs []string
	var fs []*follower
	var lns []net.Listener
	for i := 0; i < k; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		f := &follower{}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go f.serve(c)
			}
		}()
		addrs = append(addrs, ln.Addr().String())
		fs = append(fs, f)
		lns = append(lns, ln)
	}
	return addrs, fs, lns
}

func TestRoundReachesEveryFollower(t *testing.T) {
	addrs, fs, _ := followers(t, 5)
	l, err := dial(addrs, 200)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	for i := 0; i < 3; i++ {
		if _, err := l.round(); err != nil {
			t.Fatal(err)
		}
		// A round ends only once every follower has stored its message.
		for j, f := range fs {
			f.mu.Lock()
			got := len(f.log)
			f.mu.Unlock()
			if got != i+1 {
				t.Fatalf("round %d: follower %d holds %d messages", i+1, j, got)
			}
		}
	}
	for j, f := range fs {
		var idx []uint64
		for _, m := range f.log {
			if len(m) != 200 {
				t.Errorf("follower %d: message of %d bytes, want 200", j, len(m))
			}
			idx = append(idx, binary.BigEndian.Uint64(m))
		}
		if !reflect.DeepEqual(idx, []uint64{1, 2, 3}) {
			t.Errorf("follower %d: indexes %v", j, idx)
		}
	}
}

func TestRoundFailsWhenAFollowerGoes(t *testing.T) {
	addrs, _, _ := followers(t, 3)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close() // a follower that drops its leader
		}
	}()
	l, err := dial(append(addrs, ln.Addr().String()), 200)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	time.Sleep(10 * time.Millisecond)
	if _, err := l.round(); err == nil {
		t.Fatal("a round without the dropped follower's acknowledgement ended without an error")
	}
	if _, err := l.round(); err == nil {
		t.Fatal("the round after a failure ended without an error")
	}
}

func TestQuantiles(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	got := quantiles(d, .5, .99, 1)
	if want := []string{"51.00", "99.00", "100.00"}; !reflect.DeepEqual(got, want) {
		t.Errorf("quantiles = %v, want %v", got, want)
	}
}
