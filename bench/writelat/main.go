// Command writelat measures the latency of single-row UPDATEs, alternating
// between tables statement by statement, so that the tables compared (one
// cached, one not) share the machine's noise.
//
//	writelat -dsn 'sbtest:sbtest@tcp(127.0.0.1:6100)/sbtest' -tables wkv,wplain -n 300 -gap 100ms
//
// -dsn and -tables may be given again, once per proxy: a second cluster
// (another build) is then measured in the same run, its statements
// interleaved with the first's, each proxy over its own connection. Its
// tables are reported as LABEL/table, LABEL being -label's value for that
// proxy (default a, b, ...).
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

type list []string

func (l *list) String() string     { return strings.Join(*l, " ") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

// target is one table written through one proxy's connection.
type target struct {
	db    *sql.DB
	name  string // as reported
	table string
}

func main() {
	var dsns, tableLists, labels list
	flag.Var(&dsns, "dsn", "go-sql-driver DSN of a proxy (text protocol is forced); repeatable")
	flag.Var(&tableLists, "tables", "comma-separated tables for the -dsn at the same position, each with columns id INT PRIMARY KEY and v INT")
	flag.Var(&labels, "label", "name of the -dsn at the same position in the output, when there are several")
	n := flag.Int("n", 300, "statements per table")
	warm := flag.Int("warmup", 20, "statements per table before measuring")
	rows := flag.Int("rows", 100, "rows per table: the statements cycle through ids 1..rows")
	gap := flag.Duration("gap", 0, "pause after each statement")
	flag.Parse()
	if len(dsns) == 0 || len(tableLists) != len(dsns) {
		flag.Usage()
		os.Exit(2)
	}
	var targets []target
	for i, dsn := range dsns {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		db, err := sql.Open("mysql", dsn+sep+"interpolateParams=true")
		if err != nil {
			fail(err)
		}
		db.SetMaxOpenConns(1)
		prefix := ""
		if len(dsns) > 1 {
			prefix = string(rune('a'+i)) + "/"
			if i < len(labels) {
				prefix = labels[i] + "/"
			}
		}
		for _, t := range strings.Split(tableLists[i], ",") {
			targets = append(targets, target{db: db, name: prefix + t, table: t})
		}
	}
	lat := make([][]time.Duration, len(targets))
	for i := -*warm; i < *n; i++ {
		for j := range targets {
			// Rotate which target goes first, so none always follows the
			// same other one.
			k := (j + i + *warm) % len(targets)
			t := targets[k]
			start := time.Now()
			if _, err := t.db.Exec("UPDATE `"+t.table+"` SET v = v + 1 WHERE id = ?", 1+(i+*warm)%*rows); err != nil {
				fail(fmt.Errorf("%s: %w", t.name, err))
			}
			if i >= 0 {
				lat[k] = append(lat[k], time.Since(start))
			}
			if *gap > 0 {
				time.Sleep(*gap)
			}
		}
	}
	for k, t := range targets {
		d := lat[k]
		sort.Slice(d, func(a, b int) bool { return d[a] < d[b] })
		q := func(f float64) string {
			return fmt.Sprintf("%.2f", float64(d[int(f*float64(len(d)-1)+0.5)])/float64(time.Millisecond))
		}
		fmt.Printf("%s\t%d\t%s\t%s\t%s\t%s\n", t.name, len(d), q(.5), q(.9), q(.99), q(1))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "writelat:", err)
	os.Exit(1)
}
