// Package memlimit holds the proxy within one process-wide memory limit:
// the Go runtime's soft limit (the collector works harder as the heap
// nears it), and, when the live heap still passes a high-water mark, the
// caches are shed (plans, learned metadata, cached answers: all rebuilt
// from use) before the process grows further.
package memlimit

import (
	"context"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// HighWater is the share of the limit the live heap may reach before the
// caches are shed.
const HighWater = 0.8

// Watcher sheds the caches when the live heap passes HighWater of Limit.
type Watcher struct {
	Limit int64
	Shed  func() // drops what can be rebuilt (plugins.Chain.Shed)
	Log   *slog.Logger
	// Every is how often the heap is read.
	Every time.Duration

	sheds   atomic.Uint64
	lastLog time.Time
}

// Start sets the runtime's limit and watches until ctx ends.
func (w *Watcher) Start(ctx context.Context) {
	debug.SetMemoryLimit(w.Limit)
	if w.Every <= 0 {
		w.Every = time.Second
	}
	go func() {
		t := time.NewTicker(w.Every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				w.check()
			}
		}
	}()
}

// live is the heap the last collection found live.
func live() int64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

func (w *Watcher) check() {
	before := live()
	if float64(before) < HighWater*float64(w.Limit) {
		return
	}
	w.Shed()
	w.sheds.Add(1)
	if time.Since(w.lastLog) > time.Minute {
		w.lastLog = time.Now()
		w.Log.Warn("memory: the live heap passed the high-water mark of memory_limit; the caches were shed",
			"live_bytes", before, "memory_limit", w.Limit, "high_water", HighWater)
	}
}

// Metrics are the watcher's gauges and counters.
func (w *Watcher) Metrics() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tableproxy_memory_limit_bytes",
			Help: "The process-wide memory limit (memory_limit)."}, func() float64 { return float64(w.Limit) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tableproxy_memory_live_heap_bytes",
			Help: "The heap the last garbage collection found live."}, func() float64 { return float64(live()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tableproxy_memory_sheds_total",
			Help: "Times the caches were shed because the live heap passed the high-water mark of memory_limit."},
			func() float64 { return float64(w.sheds.Load()) }),
	}
}
