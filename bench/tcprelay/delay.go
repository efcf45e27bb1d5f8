package main

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// chunkSize is the most one read takes from a connection; queueLen is how
// many chunks one direction may hold before its reader stops reading.
const (
	chunkSize = 32 << 10
	queueLen  = 256
)

type chunk struct {
	buf *[]byte
	n   int
	at  time.Time // when the reader got it
}

var bufPool = sync.Pool{New: func() any {
	b := make([]byte, chunkSize)
	return &b
}}

// Hold times are counted in buckets of histStep up to histMax.
const (
	histStep    = 10 * time.Microsecond
	histBuckets = 1000 // up to 10ms; longer holds count in the last bucket
)

// delayStats counts, over all connections, how long chunks were held in one
// direction: from the read that got them to the start of their write. The
// hold is the configured delay plus however late the writer woke up.
type delayStats struct {
	chunks atomic.Int64
	sumNs  atomic.Int64
	maxNs  atomic.Int64
	hist   [histBuckets]atomic.Int64
}

func (s *delayStats) add(d time.Duration) {
	s.chunks.Add(1)
	s.sumNs.Add(int64(d))
	for {
		m := s.maxNs.Load()
		if int64(d) <= m || s.maxNs.CompareAndSwap(m, int64(d)) {
			break
		}
	}
	s.hist[min(int(d/histStep), histBuckets-1)].Add(1)
}

// percentile returns the upper bound of the bucket holding the p-th
// percentile hold time.
func (s *delayStats) percentile(p float64) time.Duration {
	n := s.chunks.Load()
	want := int64(float64(n)*p/100 + 0.5)
	var seen int64
	for i := range s.hist {
		seen += s.hist[i].Load()
		if seen >= want && seen > 0 {
			return time.Duration(i+1) * histStep
		}
	}
	return time.Duration(histBuckets) * histStep
}

// reset returns a copy of the counts so far and sets them to zero. Chunks
// counted while it runs may land in either.
func (s *delayStats) reset() *delayStats {
	c := new(delayStats)
	c.chunks.Store(s.chunks.Swap(0))
	c.sumNs.Store(s.sumNs.Swap(0))
	c.maxNs.Store(s.maxNs.Swap(0))
	for i := range s.hist {
		c.hist[i].Store(s.hist[i].Swap(0))
	}
	return c
}

func (s *delayStats) String() string {
	n := s.chunks.Load()
	if n == 0 {
		return "0 chunks"
	}
	return fmt.Sprintf("%d chunks held: mean %v, p50 %v, p95 %v, p99 %v, max %v",
		n, time.Duration(s.sumNs.Load()/n).Round(time.Microsecond), s.percentile(50), s.percentile(95),
		s.percentile(99), time.Duration(s.maxNs.Load()).Round(time.Microsecond))
}

// delayedCopy copies src to dst like io.Copy, but writes each chunk delay
// after it was read, in order. The reading goroutine (this one) stamps and
// queues chunks; a writer goroutine waits for each chunk's due time and
// writes it. It returns once src has ended and everything read from it has
// been written, or once dst fails.
func delayedCopy(dst, src net.Conn, delay time.Duration, stats *delayStats) {
	queue := make(chan chunk, queueLen)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		w, err := newWaiter()
		if err != nil {
			// Cannot wait precisely: close both sides rather than relay
			// with a wrong delay.
			dst.Close()
			src.Close()
			for c := range queue {
				bufPool.Put(c.buf)
			}
			return
		}
		defer w.close()
		failed := false
		for c := range queue {
			if !failed {
				due := c.at.Add(delay)
				if d := time.Until(due); d > 0 {
					w.wait(d)
				}
				stats.add(time.Since(c.at))
				if _, err := dst.Write((*c.buf)[:c.n]); err != nil {
					failed = true
					// Unblock the reader; the caller closes both anyway.
					src.Close()
				}
			}
			bufPool.Put(c.buf)
		}
	}()
	for {
		buf := bufPool.Get().(*[]byte)
		n, err := src.Read(*buf)
		if n > 0 {
			queue <- chunk{buf: buf, n: n, at: time.Now()}
		} else {
			bufPool.Put(buf)
		}
		if err != nil {
			// End of stream, or the connection failed or was closed: what
			// is queued is still delivered (if dst takes it), as a network
			// would.
			break
		}
	}
	close(queue)
	<-writerDone
}
