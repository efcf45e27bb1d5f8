// Command fleetprobe measures what a fleet of proxies does when one of
// them stops: a sidecar paused (SIGSTOP) or the leader killed (kill -9).
// bench/fleet.sh runs it; it signals the processes itself so that its
// clock starts at the signal.
//
//	fleetprobe stall -writer DSN -stalled DSN -pid PID [-n 20] [-gap 100ms] [-pause 5s]
//	fleetprobe leaderloss -pid PID -writer DSN -sidecar DSN [-sidecar DSN ...] [-watch 8s]
//
// stall: a write through -writer, then the sidecar -pid is paused and
// -n writes follow through -writer, -gap apart (the first one at once):
// the first may wait out the paused sidecar's lease, the others must not.
// After -pause the sidecar is resumed and read from at once and until it
// answers from memory: every read must return the last value written.
//
// leaderloss: every -sidecar answers wkv from memory; the leader -pid is
// killed; each sidecar is read every -every (100 ms) for -watch, noting when it
// answered from memory (its hits went up) and when not; then one write
// through -writer, and the time until every sidecar answers the new value
// from memory.
//
// Both print Markdown lines, and exit 1 when a read returned a stale row.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, " ") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: fleetprobe stall|leaderloss [flags]"))
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	writer := fs.String("writer", "", "DSN of the proxy the writes go through")
	stalled := fs.String("stalled", "", "stall: DSN of the sidecar paused")
	pid := fs.Int("pid", 0, "the process paused (stall) or killed (leaderloss)")
	n := fs.Int("n", 20, "stall: writes while the sidecar is paused")
	gap := fs.Duration("gap", 100*time.Millisecond, "stall: pause between writes")
	pause := fs.Duration("pause", 5*time.Second, "stall: how long the sidecar stays paused")
	watch := fs.Duration("watch", 8*time.Second, "leaderloss: how long the sidecars are watched after the kill")
	every := fs.Duration("every", 100*time.Millisecond, "leaderloss: how often each sidecar is read")
	table := fs.String("table", "wkv", "the cached table (id INT PRIMARY KEY, v INT)")
	var sidecars list
	fs.Var(&sidecars, "sidecar", "leaderloss: DSN of a sidecar to watch; repeatable")
	fs.Parse(os.Args[2:])
	if *writer == "" || *pid == 0 {
		fail(fmt.Errorf("-writer and -pid are required"))
	}
	p := &probe{table: *table}
	var stale int
	switch os.Args[1] {
	case "stall":
		stale = p.stall(*writer, *stalled, *pid, *n, *gap, *pause)
	case "leaderloss":
		stale = p.leaderLoss(*writer, sidecars, *pid, *watch, *every)
	default:
		fail(fmt.Errorf("unknown probe %q", os.Args[1]))
	}
	if stale > 0 {
		os.Exit(1)
	}
}

type probe struct{ table string }

// conn opens one connection to a proxy.
func conn(dsn string) *sql.Conn {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	db, err := sql.Open("mysql", dsn+sep+"interpolateParams=true&timeout=5s")
	if err != nil {
		fail(err)
	}
	c, err := db.Conn(context.Background())
	if err != nil {
		fail(err)
	}
	return c
}

// write adds one to row 1 and returns the new value and how long the
// UPDATE took.
func (p *probe) write(c *sql.Conn) (int, time.Duration) {
	ctx := context.Background()
	start := time.Now()
	if _, err := c.ExecContext(ctx, "UPDATE `"+p.table+"` SET v = v + 1 WHERE id = 1"); err != nil {
		fail(err)
	}
	took := time.Since(start)
	var v int
	if err := c.QueryRowContext(ctx, "SELECT v FROM `"+p.table+"` WHERE id = 1").Scan(&v); err != nil {
		fail(err)
	}
	return v, took
}

// read returns row 1's value and whether this proxy answered it from
// memory (its hits went up; one reader per proxy).
func (p *probe) read(ctx context.Context, c *sql.Conn) (v int, memory bool, err error) {
	h0, err := p.hits(ctx, c)
	if err != nil {
		return 0, false, err
	}
	if err = c.QueryRowContext(ctx, "SELECT v FROM `"+p.table+"` WHERE id = 1").Scan(&v); err != nil {
		return 0, false, err
	}
	h1, err := p.hits(ctx, c)
	return v, h1 > h0, err
}

func (p *probe) hits(ctx context.Context, c *sql.Conn) (int64, error) {
	var h int64
	err := c.QueryRowContext(ctx, "SELECT hits FROM tableproxy.cached_tables WHERE table_name = ?", p.table).Scan(&h)
	return h, err
}

// untilMemory reads through c until it answers from memory with want,
// and returns how long that took and how many reads returned another
// value (stale).
func (p *probe) untilMemory(c *sql.Conn, want int, limit time.Duration) (time.Duration, int, error) {
	start := time.Now()
	stale := 0
	for time.Since(start) < limit {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		v, mem, err := p.read(ctx, c)
		cancel()
		if err != nil {
			return 0, stale, err
		}
		if v != want {
			stale++
			fmt.Fprintf(os.Stderr, "fleetprobe: STALE: read %d, want %d\n", v, want)
		}
		if mem && v == want {
			return time.Since(start), stale, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 0, stale, fmt.Errorf("no read from memory within %s", limit)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

func quantile(d []time.Duration, f float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	return s[int(f*float64(len(s)-1)+0.5)]
}

func (p *probe) stall(writerDSN, stalledDSN string, pid, n int, gap, pause time.Duration) int {
	w, s := conn(writerDSN), conn(stalledDSN)
	var before []time.Duration
	v := 0
	for i := 0; i < 10; i++ {
		var d time.Duration
		v, d = p.write(w)
		before = append(before, d)
		time.Sleep(gap)
	}
	if _, stale, err := p.untilMemory(s, v, 10*time.Second); err != nil || stale > 0 {
		fail(fmt.Errorf("the sidecar to pause does not answer from memory before: %v (%d stale)", err, stale))
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		fail(err)
	}
	stopped := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	var during []time.Duration
	for i := 0; i < n; i++ {
		var d time.Duration
		v, d = p.write(w)
		during = append(during, d)
		time.Sleep(gap)
	}
	if rest := pause - time.Since(stopped); rest > 0 {
		time.Sleep(rest)
	}
	syscall.Kill(pid, syscall.SIGCONT)
	resumed = true
	paused := time.Since(stopped)
	back, stale, err := p.untilMemory(s, v, 30*time.Second)
	if err != nil {
		fail(fmt.Errorf("after SIGCONT: %w", err))
	}
	later := during[1:]
	fmt.Printf("Paused sidecar (SIGSTOP for %.1f s): writes through another proxy, before the pause p50 %s ms; "+
		"**the first write after it %s ms**; the %d after that p50 %s / max %s ms. "+
		"Resumed: %d stale reads, answering the last value from memory again after %s ms.\n",
		paused.Seconds(), ms(quantile(before, .5)), ms(during[0]), len(later), ms(quantile(later, .5)), ms(quantile(later, 1)),
		stale, ms(back))
	return stale
}

// sample is one read of one sidecar, at since the kill.
type sample struct {
	at     time.Duration
	memory bool
	ok     bool
}

func (p *probe) leaderLoss(writerDSN string, dsns []string, pid int, watch, every time.Duration) int {
	w := conn(writerDSN)
	v, _ := p.write(w)
	cs := make([]*sql.Conn, len(dsns))
	for i, d := range dsns {
		cs[i] = conn(d)
		if _, stale, err := p.untilMemory(cs[i], v, 10*time.Second); err != nil || stale > 0 {
			fail(fmt.Errorf("sidecar %d does not answer from memory before the kill: %v (%d stale)", i, err, stale))
		}
	}
	samples := make([][]sample, len(cs))
	staleN := 0
	var mu sync.Mutex
	var wg sync.WaitGroup
	var killed time.Time
	start := make(chan struct{})
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for time.Since(killed) < watch {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				got, mem, err := p.read(ctx, c)
				cancel()
				if err == nil && got != v {
					mu.Lock()
					staleN++
					mu.Unlock()
					fmt.Fprintf(os.Stderr, "fleetprobe: STALE on sidecar %d: %d, want %d\n", i, got, v)
				}
				samples[i] = append(samples[i], sample{at: time.Since(killed), memory: mem && err == nil, ok: err == nil})
				time.Sleep(every)
			}
		}()
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		fail(err)
	}
	killed = time.Now()
	close(start)
	wg.Wait()
	// Per sidecar: the longest stretch without an answer from memory, and
	// when the last one ended.
	stopped, worstGap, lastBack, never := 0, time.Duration(0), time.Duration(0), 0
	for _, ss := range samples {
		var gapStart time.Duration = -1
		had := false
		for _, s := range ss {
			if !s.memory {
				if gapStart < 0 {
					gapStart = s.at
				}
				had = true
				continue
			}
			if gapStart >= 0 {
				worstGap = max(worstGap, s.at-gapStart)
				lastBack = max(lastBack, s.at)
				gapStart = -1
			}
		}
		if had {
			stopped++
		}
		if gapStart >= 0 || len(ss) == 0 || !ss[len(ss)-1].memory {
			never++
		}
	}
	// Then a write, through the new leader, and every sidecar answering
	// its value from memory.
	wstart := time.Now()
	v, took := p.write(w)
	var all time.Duration
	for i, c := range cs {
		d, stale, err := p.untilMemory(c, v, 20*time.Second)
		staleN += stale
		if err != nil {
			fail(fmt.Errorf("sidecar %d after the write: %w", i, err))
		}
		_ = d
		all = time.Since(wstart)
	}
	outage := "none stopped answering from memory"
	if stopped > 0 {
		outage = fmt.Sprintf("%d stopped answering from memory for a while, the longest stretch %s ms; "+
			"**every sidecar answering from memory again %s ms after the kill**", stopped, ms(worstGap), ms(lastBack))
	}
	fmt.Printf("Leader killed (kill -9) with %d sidecars watched, each read every %s ms for %.0f s: %s; "+
		"%d not answering from memory at the end; %d stale reads. "+
		"Then a write through the new leader took %s ms, and every sidecar answered its value from memory %s ms after it began.\n",
		len(cs), ms(every), watch.Seconds(), outage, never, staleN, ms(took), ms(all))
	return staleN
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "fleetprobe:", err)
	os.Exit(2)
}
