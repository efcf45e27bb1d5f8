// Command tcprelay is a minimal TCP relay used by bench/run.sh --floor.
//
// It is not part of tableproxy. It forwards bytes between each client and the
// target with one pair of goroutines per connection (io.Copy in each
// direction) and never looks at the MySQL protocol. Benchmarking sysbench
// through it shows what any userspace relay costs on the machine: the extra
// loopback hops, syscalls and context switches. That is the floor the proxy
// cannot go below, so the proxy/relay ratio in the benchmark results isolates
// the cost of the proxy's own work from the cost of relaying at all.
//
// Usage:
//
//	tcprelay -listen 127.0.0.1:6040 -target 127.0.0.1:3307
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
)

func main() {
	listen := flag.String("listen", "127.0.0.1:6040", "address to accept clients on")
	target := flag.String("target", "", "address to relay each connection to (required)")
	flag.Parse()
	if *target == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: tcprelay -listen HOST:PORT -target HOST:PORT")
		os.Exit(2)
	}
	log.SetPrefix("tcprelay: ")
	log.SetFlags(log.LstdFlags)

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("relaying %s -> %s", ln.Addr(), *target)

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
			relay(client, *target, track, untrack)
		}()
	}
	wg.Wait()
}

// relay copies bytes between client and a new connection to target until
// either side ends, then closes both.
func relay(client net.Conn, target string, track func(net.Conn) bool, untrack func(net.Conn)) {
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
	go func() {
		io.Copy(server, client)
		done <- struct{}{}
	}()
	go func() {
		io.Copy(client, server)
		done <- struct{}{}
	}()
	// When either direction ends, close both connections so that the other
	// io.Copy returns too.
	<-done
	client.Close()
	server.Close()
	<-done
}
