// Command soak sends random distinct statements through a proxy for a
// long time and samples the proxy's resident memory: whatever clients
// send, it must stay flat once the bounded caches have filled. Each of
// -clients sessions draws statements from a mix: reads of the cached
// table in ever-new shapes and literal lists (some of them long),
// prepared statements opened and closed, writes of the cached and the
// plain table, user variables holding long strings, statements the
// backend refuses, and a reconnect now and then. It prints one line per
// -sample, then the resident memory of the second quarter of the run
// against the last one; it exits 1 if the last quarter's peak is more
// than -slack above the second quarter's.
//
//	soak -addr 127.0.0.1:6700 -pid 1234 -duration 1h
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
)

var (
	addr     = flag.String("addr", "127.0.0.1:6700", "the proxy")
	user     = flag.String("user", "sbtest", "user")
	password = flag.String("password", "sbtest", "password")
	db       = flag.String("db", "sbtest", "database")
	cached   = flag.String("cached", "soak_c", "the cached table (id INT PRIMARY KEY, k INT, c VARCHAR(100), v INT)")
	plain    = flag.String("plain", "soak_p", "a table that is not cached, of the same columns")
	rows     = flag.Int("rows", 2000, "rows of the cached table (ids 1..rows)")
	pid      = flag.Int("pid", 0, "the proxy's process id, for its resident memory")
	metrics  = flag.String("metrics", "", "the proxy's metrics address, for its live heap (optional)")
	duration = flag.Duration("duration", time.Hour, "how long")
	clients  = flag.Int("clients", 4, "sessions")
	rate     = flag.Int("rate", 300, "statements per second, all sessions together")
	sample   = flag.Duration("sample", 30*time.Second, "how often memory is sampled")
	slack    = flag.Int("slack", 16, "MiB the last quarter's peak may exceed the second quarter's")
	seed     = flag.Int64("seed", 0, "random seed (0: from the clock)")
)

type counters struct{ statements, errors, reconnects atomic.Int64 }

func main() {
	flag.Parse()
	if *pid == 0 {
		fmt.Fprintln(os.Stderr, "soak: -pid is required")
		os.Exit(2)
	}
	if *seed == 0 {
		*seed = time.Now().UnixNano()
	}
	fmt.Printf("soak: %s through %s, %d sessions, %d statements/s, seed %d\n", *duration, *addr, *clients, *rate, *seed)
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	var c counters
	tick := time.NewTicker(time.Second / time.Duration(max(*rate, 1)))
	defer tick.Stop()
	tokens := make(chan struct{}, *clients)
	go func() {
		for {
			select {
			case <-ctx.Done():
				close(tokens)
				return
			case <-tick.C:
				select {
				case tokens <- struct{}{}:
				default:
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for i := 0; i < *clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			session(ctx, rand.New(rand.NewSource(*seed+int64(i))), tokens, &c)
		}(i)
	}
	type point struct {
		at       time.Duration
		rss, hip int64
	}
	var points []point
	start := time.Now()
	record := func() {
		p := point{time.Since(start), rss(*pid), liveHeap(*metrics)}
		points = append(points, p)
		fmt.Printf("%8s  statements %9d  errors %7d  reconnects %6d  RSS %4d MiB  live heap %4d MiB\n",
			p.at.Round(time.Second), c.statements.Load(), c.errors.Load(), c.reconnects.Load(), p.rss>>20, p.hip>>20)
	}
	record()
	samples := time.NewTicker(*sample)
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-samples.C:
			record()
		}
	}
	wg.Wait()
	record()
	n := len(points)
	if n < 8 {
		fmt.Println("soak: too few samples for a verdict")
		return
	}
	peak := func(ps []point) (m int64) {
		for _, p := range ps {
			m = max(m, p.rss)
		}
		return m
	}
	median := func(ps []point) int64 {
		v := make([]int64, len(ps))
		for i, p := range ps {
			v[i] = p.rss
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	second, last := points[n/4:n/2], points[3*n/4:]
	fmt.Printf("soak: RSS second quarter median %d MiB, peak %d MiB; last quarter median %d MiB, peak %d MiB; %d statements (%d refused by the backend or the proxy), %d reconnects\n",
		median(second)>>20, peak(second)>>20, median(last)>>20, peak(last)>>20, c.statements.Load(), c.errors.Load(), c.reconnects.Load())
	if peak(last) > peak(second)+int64(*slack)<<20 {
		fmt.Printf("soak: GROWING: the last quarter's peak is more than %d MiB above the second quarter's\n", *slack)
		os.Exit(1)
	}
	fmt.Println("soak: flat")
}

// session runs statements, one per token, until the tokens end.
func session(ctx context.Context, rng *rand.Rand, tokens <-chan struct{}, c *counters) {
	var conn *client.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for range tokens {
		if conn == nil || rng.Intn(500) == 0 {
			if conn != nil {
				conn.Close()
				c.reconnects.Add(1)
			}
			var err error
			if conn, err = client.ConnectWithTimeout(*addr, *user, *password, *db, 5*time.Second); err != nil {
				c.errors.Add(1)
				conn = nil
				time.Sleep(100 * time.Millisecond)
				continue
			}
		}
		c.statements.Add(1)
		if err := step(conn, rng); err != nil {
			c.errors.Add(1)
			if ctx.Err() == nil && !isServerError(err) {
				conn.Close() // the connection is gone: a new one next time
				conn = nil
			}
		}
	}
}

// isServerError: the server answered with an error (the session goes
// on), not the connection failing.
func isServerError(err error) bool {
	var me *mysql.MyError
	return errors.As(err, &me)
}

var columns = []string{"id", "k", "c", "v"}

// step sends one statement (or a prepared statement's life) drawn at
// random.
func step(conn *client.Conn, rng *rand.Rand) error {
	switch x := rng.Intn(100); {
	case x < 55:
		_, err := conn.Execute(randomRead(rng))
		return err
	case x < 65:
		st, err := conn.Prepare(randomRead(rng) + fmt.Sprintf(" /* %d */", rng.Int63()))
		if err != nil {
			return err
		}
		defer st.Close()
		for i := rng.Intn(3); i >= 0; i-- {
			if st.ParamNum() > 0 {
				break
			}
			if _, err := st.Execute(); err != nil {
				return err
			}
		}
		return nil
	case x < 75:
		_, err := conn.Execute(fmt.Sprintf("UPDATE %s SET v = %d WHERE id = %d", *cached, rng.Intn(1000), 1+rng.Intn(*rows)))
		return err
	case x < 82:
		id := *rows + 1 + rng.Intn(100000)
		if _, err := conn.Execute(fmt.Sprintf("INSERT INTO %s (id, k, c, v) VALUES (%d, %d, '%s', 0) ON DUPLICATE KEY UPDATE v = v + 1", *plain, id, rng.Intn(100), word(rng, 1+rng.Intn(90)))); err != nil {
			return err
		}
		_, err := conn.Execute(fmt.Sprintf("DELETE FROM %s WHERE id = %d", *plain, *rows+1+rng.Intn(100000)))
		return err
	case x < 88:
		_, err := conn.Execute(fmt.Sprintf("SET @s%d = '%s'", rng.Intn(20), strings.Repeat(word(rng, 10), 1+rng.Intn(5000))))
		return err
	case x < 94:
		_, err := conn.Execute(fmt.Sprintf("SELEC %s FROM %s WHERE %s", word(rng, 8), *cached, word(rng, 1+rng.Intn(2000))))
		return err
	default:
		_, err := conn.Execute(fmt.Sprintf("SELECT c, '%s' AS x%d FROM %s WHERE id = %d", word(rng, 1+rng.Intn(50000)), rng.Intn(1000), *cached, 1+rng.Intn(*rows)))
		return err
	}
}

// randomRead is a read of the cached table in a shape drawn at random:
// columns, a condition (an IN list of up to thousands, a range, a
// comparison), ordering and limit.
func randomRead(rng *rand.Rand) string {
	var b strings.Builder
	b.WriteString("SELECT ")
	cols := rng.Perm(len(columns))[:1+rng.Intn(len(columns))]
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(columns[c])
		if rng.Intn(4) == 0 {
			fmt.Fprintf(&b, " AS a%d", rng.Intn(1000))
		}
	}
	fmt.Fprintf(&b, " FROM %s WHERE ", *cached)
	switch rng.Intn(4) {
	case 0:
		b.WriteString("id IN (")
		n := 1 + rng.Intn(10)
		if rng.Intn(10) == 0 {
			n = 1 + rng.Intn(5000)
		}
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(rng.Intn(*rows * 2)))
		}
		b.WriteByte(')')
	case 1:
		lo := rng.Intn(*rows)
		fmt.Fprintf(&b, "id BETWEEN %d AND %d", lo, lo+rng.Intn(200))
	case 2:
		fmt.Fprintf(&b, "k = %d", rng.Intn(100))
	default:
		fmt.Fprintf(&b, "c = '%s'", word(rng, 1+rng.Intn(20)))
	}
	if rng.Intn(2) == 0 {
		fmt.Fprintf(&b, " ORDER BY %s", columns[rng.Intn(len(columns))])
		if rng.Intn(2) == 0 {
			b.WriteString(" DESC")
		}
	}
	if rng.Intn(3) == 0 {
		fmt.Fprintf(&b, " LIMIT %d", 1+rng.Intn(100))
	}
	return b.String()
}

func word(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + rng.Intn(26))
	}
	return string(b)
}

// rss is a process's resident memory, in bytes.
func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// liveHeap is the proxy's tableproxy_memory_live_heap_bytes (0 without
// a metrics address).
func liveHeap(addr string) int64 {
	if addr == "" {
		return 0
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "tableproxy_memory_live_heap_bytes "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return int64(f)
		}
	}
	return 0
}
