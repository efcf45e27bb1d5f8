// Command writelat measures the latency of single-row UPDATEs through one
// connection, alternating between tables statement by statement, so that
// the tables compared (one cached, one not) share the machine's noise.
//
//	writelat -dsn 'sbtest:sbtest@tcp(127.0.0.1:6100)/sbtest' -tables wkv,wplain -n 300 -gap 100ms
//
// It prints one tab-separated line per table: table, statements, then
// p50, p90, p99 and max in milliseconds.
package main

import (
	"database/sql"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql"
)

func main() {
	dsn := flag.String("dsn", "", "go-sql-driver DSN of the proxy (text protocol is forced)")
	tables := flag.String("tables", "", "comma-separated tables, each with columns id INT PRIMARY KEY and v INT")
	n := flag.Int("n", 300, "statements per table")
	warm := flag.Int("warmup", 20, "statements per table before measuring")
	rows := flag.Int("rows", 100, "rows per table: the statements cycle through ids 1..rows")
	gap := flag.Duration("gap", 0, "pause after each statement")
	flag.Parse()
	if *dsn == "" || *tables == "" {
		flag.Usage()
		os.Exit(2)
	}
	sep := "?"
	if strings.Contains(*dsn, "?") {
		sep = "&"
	}
	db, err := sql.Open("mysql", *dsn+sep+"interpolateParams=true")
	if err != nil {
		fail(err)
	}
	db.SetMaxOpenConns(1)
	names := strings.Split(*tables, ",")
	lat := make([][]time.Duration, len(names))
	for i := -*warm; i < *n; i++ {
		for j := range names {
			// Alternate which table goes first, so neither always follows
			// the other's statement.
			k := (j + i&1) % len(names)
			start := time.Now()
			if _, err := db.Exec("UPDATE `"+names[k]+"` SET v = v + 1 WHERE id = ?", 1+(i+*warm)%*rows); err != nil {
				fail(fmt.Errorf("%s: %w", names[k], err))
			}
			if i >= 0 {
				lat[k] = append(lat[k], time.Since(start))
			}
			if *gap > 0 {
				time.Sleep(*gap)
			}
		}
	}
	for k, name := range names {
		d := lat[k]
		sort.Slice(d, func(a, b int) bool { return d[a] < d[b] })
		q := func(f float64) string {
			return fmt.Sprintf("%.2f", float64(d[int(f*float64(len(d)-1)+0.5)])/float64(time.Millisecond))
		}
		fmt.Printf("%s\t%d\t%s\t%s\t%s\t%s\n", name, len(d), q(.5), q(.9), q(.99), q(1))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "writelat:", err)
	os.Exit(1)
}
