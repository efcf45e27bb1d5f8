// Command fanoutfloor is the floor of a cached write's fan-out in a fleet:
// what this host charges for sending one small message to every other
// member, each in a process of its own, and waiting for every one of them
// to acknowledge it. A cached write waits for just that: its intent's
// entry goes from the leader to every follower, and the write runs once
// the slowest follower has stored it (bench/fleet.sh, "A fleet of
// sidecars").
//
//	fanoutfloor -followers 32 -n 200 -gap 100ms [-size 200] [-warmup 20]
//
// It starts -followers processes (itself, as "fanoutfloor follow"), each
// listening on loopback and keeping what it receives in an in-memory
// slice, as a sidecar's log store does. The leader holds one persistent
// TCP connection and one goroutine per follower, as Raft's replication
// does: every round it hands the goroutines an index, each one writes a
// -size byte message to its follower and reads the follower's
// acknowledgement, and the round ends with the last one. Rounds are -gap
// apart, like bench/writelat's writes. Nothing else is done: no encoding
// beyond a length and an index, no log on the leader, no fsync.
//
// It prints one tab-separated line, as bench/writelat does: fanout-K,
// rounds, then p50, p90, p99 and max of a round in milliseconds.
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "follow" {
		follow()
		return
	}
	k := flag.Int("followers", 2, "follower processes (a fleet of N sidecars has N + 2 followers)")
	n := flag.Int("n", 200, "rounds measured")
	warm := flag.Int("warmup", 20, "rounds before measuring")
	gap := flag.Duration("gap", 100*time.Millisecond, "pause after each round")
	size := flag.Int("size", 200, "bytes per message (an intent's entry is about 200)")
	flag.Parse()
	if *k < 1 || *n < 1 || *size < 0 {
		flag.Usage()
		os.Exit(2)
	}
	addrs, stop, err := spawn(*k)
	defer stop()
	if err != nil {
		fail(err)
	}
	l, err := dial(addrs, *size)
	if err != nil {
		fail(err)
	}
	defer l.close()
	lat := make([]time.Duration, 0, *n)
	for i := -*warm; i < *n; i++ {
		d, err := l.round()
		if err != nil {
			fail(err)
		}
		if i >= 0 {
			lat = append(lat, d)
		}
		time.Sleep(*gap)
	}
	q := quantiles(lat, .5, .9, .99, 1)
	fmt.Printf("fanout-%d\t%d\t%s\t%s\t%s\t%s\n", *k, len(lat), q[0], q[1], q[2], q[3])
}

// follow is a follower process: it listens on loopback, prints its
// address on a line, serves every connection, and exits when its stdin
// closes (its leader is gone).
func follow() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	fmt.Println(ln.Addr())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	f := &follower{}
	for {
		c, err := ln.Accept()
		if err != nil {
			fail(err)
		}
		go f.serve(c)
	}
}

// follower keeps every message it was sent; one connection at a time
// (its leader's).
type follower struct {
	mu  sync.Mutex
	log [][]byte
}

// serve reads messages from c until it closes: each one is a 4-byte
// length, then an 8-byte index and the rest of the message; it is kept,
// and acknowledged with its index.
func (f *follower) serve(c net.Conn) error {
	defer c.Close()
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return err
		}
		m := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		if _, err := io.ReadFull(r, m); err != nil {
			return err
		}
		if len(m) < 8 {
			return errors.New("fanoutfloor: short message")
		}
		f.mu.Lock()
		f.log = append(f.log, m)
		f.mu.Unlock()
		w.Write(m[:8])
		if err := w.Flush(); err != nil {
			return err
		}
	}
}

// spawn starts k follower processes and returns their addresses, and
// what stops them all.
func spawn(k int) ([]string, func(), error) {
	self, err := os.Executable()
	if err != nil {
		return nil, func() {}, err
	}
	var cmds []*exec.Cmd
	stop := func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	}
	addrs := make([]string, 0, k)
	for i := 0; i < k; i++ {
		c := exec.Command(self, "follow")
		c.Stderr = os.Stderr
		if _, err := c.StdinPipe(); err != nil {
			return nil, stop, err
		}
		out, err := c.StdoutPipe()
		if err != nil {
			return nil, stop, err
		}
		if err := c.Start(); err != nil {
			return nil, stop, err
		}
		cmds = append(cmds, c)
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			return nil, stop, fmt.Errorf("follower %d: %w", i, err)
		}
		addrs = append(addrs, strings.TrimSpace(line))
	}
	return addrs, stop, nil
}

// leader sends each round's message to every follower, one goroutine and
// one connection per follower.
type leader struct {
	peers   []*peer
	index   uint64
	pending atomic.Int32
	done    chan error // the round's end: nil, or the first error
	failed  atomic.Bool
}

type peer struct {
	c    net.Conn
	next chan uint64 // the round's index
}

func dial(addrs []string, size int) (*leader, error) {
	if size < 8 {
		size = 8
	}
	l := &leader{done: make(chan error, 1)}
	for _, a := range addrs {
		c, err := net.Dial("tcp", a)
		if err != nil {
			l.close()
			return nil, err
		}
		p := &peer{c: c, next: make(chan uint64, 1)}
		l.peers = append(l.peers, p)
		go l.replicate(p, size)
	}
	return l, nil
}

// replicate is one follower's goroutine: for each index handed to it,
// the message out and the acknowledgement back.
func (l *leader) replicate(p *peer, size int) {
	r, w := bufio.NewReader(p.c), bufio.NewWriter(p.c)
	msg := make([]byte, 4+size)
	binary.BigEndian.PutUint32(msg, uint32(size))
	for i := 12; i < len(msg); i++ {
		msg[i] = 'x'
	}
	var ack [8]byte
	for idx := range p.next {
		binary.BigEndian.PutUint64(msg[4:], idx)
		w.Write(msg)
		err := w.Flush()
		if err == nil {
			_, err = io.ReadFull(r, ack[:])
		}
		if err == nil && binary.BigEndian.Uint64(ack[:]) != idx {
			err = fmt.Errorf("acknowledged %d, sent %d", binary.BigEndian.Uint64(ack[:]), idx)
		}
		if err != nil && l.failed.CompareAndSwap(false, true) {
			l.done <- fmt.Errorf("%s: %w", p.c.RemoteAddr(), err)
		}
		if l.pending.Add(-1) == 0 && !l.failed.Load() {
			l.done <- nil
		}
	}
}

// round sends the next message to every follower and returns once all
// of them acknowledged it, with how long that took.
func (l *leader) round() (time.Duration, error) {
	if l.failed.Load() {
		return 0, errors.New("fanoutfloor: a follower failed")
	}
	l.index++
	start := time.Now()
	l.pending.Store(int32(len(l.peers)))
	for _, p := range l.peers {
		p.next <- l.index
	}
	err := <-l.done
	return time.Since(start), err
}

func (l *leader) close() {
	for _, p := range l.peers {
		close(p.next)
		p.c.Close()
	}
}

// quantiles returns d's quantiles fs in milliseconds, two decimals (d is
// sorted in place).
func quantiles(d []time.Duration, fs ...float64) []string {
	sort.Slice(d, func(a, b int) bool { return d[a] < d[b] })
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = fmt.Sprintf("%.2f", float64(d[int(f*float64(len(d)-1)+0.5)])/float64(time.Millisecond))
	}
	return out
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "fanoutfloor:", err)
	os.Exit(1)
}
