// Command tcprelay is a minimal TCP relay used by bench/run.sh --floor, and,
// with -delay, the network-latency stand-in of bench/run.sh --latency.
//
// It is not part of tableproxy. It forwards bytes between each client and the
// target with one pair of goroutines per connection (io.Copy in each
// direction) and never looks at the MySQL protocol. Benchmarking sysbench
// through it shows what any userspace relay costs on the machine: the extra
// loopback hops, syscalls and context switches. That is the floor the proxy
// cannot go below, so the proxy/relay ratio in the benchmark results isolates
// the cost of the proxy's own work from the cost of relaying at all.
//
// With -delay D, every byte is held for D in each direction before it is
// passed on (0.25ms per direction makes a 0.5ms round trip), which stands in
// for a network between client and server on machines without netem. Per
// connection and direction, a reader goroutine stamps each chunk it reads
// with its arrival time and queues it; a writer goroutine waits until
// stamp+D and writes the chunk, in arrival order. The reader never waits for
// the writer (up to a bounded queue), so the delay adds latency without
// limiting throughput: pipelined requests all arrive D after they were sent,
// not one D after another. The wait uses a timerfd in Go's network poller,
// because Go's own timers round sub-millisecond sleeps up to about 1ms on
// Linux.
//
// Usage:
//
//	tcprelay -listen 127.0.0.1:6040 -target 127.0.0.1:3307
//	tcprelay -listen 127.0.0.1:6050 -target 127.0.0.1:3307 -delay 250us
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:6040", "address to accept clients on")
	target := flag.String("target", "", "address to relay each connection to (required)")
	delay := flag.Duration("delay", 0, "hold each chunk this long in each direction (e.g. 250us); 0 relays at once")
	flag.Parse()
	if *target == "" || flag.NArg() != 0 || *delay < 0 {
		fmt.Fprintln(os.Stderr, "usage: tcprelay -listen HOST:PORT -target HOST:PORT [-delay DURATION]")
		os.Exit(2)
	}
	log.SetPrefix("tcprelay: ")
	log.SetFlags(log.LstdFlags)

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	if *delay > 0 {
		log.Printf("relaying %s -> %s with %v of delay in each direction", ln.Addr(), *target, *delay)
	} else {
		log.Printf("relaying %s -> %s", ln.Addr(), *target)
	}
	var stats [2]delayStats // client->server, server->client

	var (
		mu      sync.Mutex
		conns   = make(map[net.Conn]struct{})
		closing bool
		wg      sync.WaitGroup
	)
	track := func(c net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if closing {
			return false
		}
		conns[c] = struct{}{}
		return true
	}
	untrack := func(c net.Conn) {
		mu.Lock()
		delete(conns, c)
		mu.Unlock()
	}

	// SIGUSR1 logs the hold times since the last SIGUSR1 (or the start) and
	// starts counting afresh, so that a benchmark can report them per run.
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go func() {
		for range usr1 {
			log.Printf("client->server: %s", stats[0].reset().String())
			log.Printf("server->client: %s", stats[1].reset().String())
		}
	}()

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s := <-sigs
		log.Printf("%v: shutting down", s)
		mu.Lock()
		closing = true
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		ln.Close()
	}()

	for {
		client, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				break
			}
			log.Printf("accept: %v", err)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			relay(client, *target, *delay, &stats, track, untrack)
		}()
	}
	wg.Wait()
	if *delay > 0 {
		log.Printf("client->server: %s", stats[0].reset().String())
		log.Printf("server->client: %s", stats[1].reset().String())
	}
}

// relay copies bytes between client and a new connection to target until
// either side ends, then closes both.
func relay(client net.Conn, target string, delay time.Duration, stats *[2]delayStats,
	track func(net.Conn) bool, untrack func(net.Conn)) {
	defer client.Close()
	if !track(client) {
		return
	}
	defer untrack(client)

	server, err := net.Dial("tcp", target)
	if err != nil {
		log.Printf("dial %s: %v", target, err)
		return
	}
	defer server.Close()
	if !track(server) {
		return
	}
	defer untrack(server)

	done := make(chan struct{}, 2)
	if delay > 0 {
		go func() {
			delayedCopy(server, client, delay, &stats[0])
			done <- struct{}{}
		}()
		go func() {
			delayedCopy(client, server, delay, &stats[1])
			done <- struct{}{}
		}()
	} else {
		go func() {
			io.Copy(server, client)
			done <- struct{}{}
		}()
		go func() {
			io.Copy(client, server)
			done <- struct{}{}
		}()
	}
	// When either direction ends, close both connections so that the other
	// io.Copy returns too.
	<-done
	client.Close()
	server.Close()
	<-done
}
