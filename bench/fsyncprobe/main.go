// Command fsyncprobe measures how long a small append + fsync takes in a
// directory, with a pause between appends, and prints p50, p99 and max in
// milliseconds. The Raft log and the backend both fsync on every commit, so
// this is the disk noise a write-latency run had to live with; on a shared
// VM it moves by an order of magnitude from one minute to the next.
//
//	fsyncprobe -dir /tmp/run -n 100 -gap 20ms
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"time"
)

func main() {
	dir := flag.String("dir", ".", "directory on the disk to probe")
	n := flag.Int("n", 100, "appends")
	gap := flag.Duration("gap", 20*time.Millisecond, "pause between appends (an idle disk is slower)")
	flag.Parse()
	f, err := os.CreateTemp(*dir, "fsyncprobe-*")
	if err != nil {
		fail(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 200)
	lat := make([]time.Duration, 0, *n)
	for i := 0; i < *n; i++ {
		if _, err := f.Write(buf); err != nil {
			fail(err)
		}
		start := time.Now()
		if err := f.Sync(); err != nil {
			fail(err)
		}
		lat = append(lat, time.Since(start))
		time.Sleep(*gap)
	}
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	ms := func(f float64) float64 {
		return float64(lat[int(f*float64(len(lat)-1)+0.5)]) / float64(time.Millisecond)
	}
	fmt.Printf("append+fsync every %v: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", *gap, ms(.5), ms(.99), ms(1))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "fsyncprobe:", err)
	os.Exit(1)
}
