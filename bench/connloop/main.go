// Command connloop measures what a connect-heavy client costs: each of
// -threads goroutines logs in, runs one statement, and closes, for
// -duration, against each -addr in turn (repeated -repeat times,
// interleaved, so that the host's drift falls on all alike). It prints one
// line per address: logins per second (median of the repeats, and their
// range) and the p95 of one connect-query-close.
//
//	connloop -user sbtest -password sbtest -db sbtest -addr direct=127.0.0.1:3307 -addr proxy=127.0.0.1:6034
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
)

type addrs []string

func (a *addrs) String() string     { return strings.Join(*a, ",") }
func (a *addrs) Set(v string) error { *a = append(*a, v); return nil }

func main() {
	var targets addrs
	flag.Var(&targets, "addr", "name=host:port to measure (repeatable)")
	user := flag.String("user", "sbtest", "user")
	password := flag.String("password", "sbtest", "password")
	db := flag.String("db", "sbtest", "database")
	query := flag.String("query", "SELECT 1", "the statement each connection runs")
	threads := flag.Int("threads", 8, "concurrent clients")
	duration := flag.Duration("duration", 10*time.Second, "per run")
	repeat := flag.Int("repeat", 3, "runs per address, interleaved")
	flag.Parse()
	if len(targets) == 0 {
		fmt.Fprintln(os.Stderr, "connloop: no -addr")
		os.Exit(2)
	}
	rates := map[string][]float64{}
	p95s := map[string][]time.Duration{}
	for r := 0; r < *repeat; r++ {
		for _, t := range targets {
			name, addr, ok := strings.Cut(t, "=")
			if !ok {
				name, addr = t, t
			}
			rate, p95, errs := run(addr, *user, *password, *db, *query, *threads, *duration)
			if errs > 0 {
				fmt.Fprintf(os.Stderr, "connloop: %s: %d failed connections\n", name, errs)
			}
			rates[name] = append(rates[name], rate)
			p95s[name] = append(p95s[name], p95)
		}
	}
	fmt.Printf("| target | logins/s (median) | range | p95 connect+query+close |\n|---|---:|---|---:|\n")
	for _, t := range targets {
		name, _, _ := strings.Cut(t, "=")
		rs := slices.Clone(rates[name])
		slices.Sort(rs)
		ps := slices.Clone(p95s[name])
		slices.Sort(ps)
		fmt.Printf("| %s | %.0f | %.0f-%.0f | %s |\n", name, rs[len(rs)/2], rs[0], rs[len(rs)-1], ps[len(ps)/2].Round(10*time.Microsecond))
	}
}

// run measures one address: logins per second, p95 of one cycle, errors.
func run(addr, user, password, db, query string, threads int, d time.Duration) (float64, time.Duration, int64) {
	var done, errs atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < threads; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for ctx.Err() == nil {
				t0 := time.Now()
				c, err := client.ConnectWithTimeout(addr, user, password, db, 5*time.Second)
				if err == nil {
					_, err = c.Execute(query)
					c.Close()
				}
				if err != nil {
					errs.Add(1)
					continue
				}
				done.Add(1)
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	el := time.Since(start)
	slices.Sort(lat)
	var p95 time.Duration
	if len(lat) > 0 {
		p95 = lat[len(lat)*95/100]
	}
	return float64(done.Load()) / el.Seconds(), p95, errs.Load()
}
