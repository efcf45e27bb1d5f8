// Package memlimit holds the proxy within one process-wide memory limit:
// the Go runtime's soft limit (the collector works harder as the heap
// nears it), and, when the live heap still passes a high-water mark, the
// caches are shed (plans, learned metadata, cached answers: all rebuilt
// from use) before the process grows further. What cannot be shed (the
// cached tables' copies, the sessions' own memory) makes the proxy
// refuse new clients while the live heap stays past the mark, with the
// backend's out-of-memory error, rather than grow until it is killed.
package memlimit

import (
	"context"
	"log/slog"
	"runtime"
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
	pressed bool        // the last check found the live heap past the mark
	over    atomic.Bool // past the mark twice running: shedding did not help
}

// Over reports whether the live heap stayed past the high-water mark
// after the caches were shed: the proxy then takes no new clients.
func (w *Watcher) Over() bool { return w.over.Load() }

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
	if w.over.Load() {
		// Refusing clients, the proxy may allocate too little for a
		// collection to come and see what was freed meanwhile (a table
		// uncached): one is run, so that clients are taken again soon.
		runtime.GC()
	}
	before := live()
	if float64(before) < HighWater*float64(w.Limit) {
		w.pressed = false
		if w.over.Swap(false) {
			w.Log.Warn("memory: the live heap is back under the high-water mark of memory_limit; new clients are taken again",
				"live_bytes", before, "memory_limit", w.Limit)
		}
		return
	}
	if w.pressed && !w.over.Swap(true) {
		w.Log.Error("memory: the live heap stays past the high-water mark of memory_limit after the caches were shed; new clients are refused (error 1041) until it falls",
			"live_bytes", before, "memory_limit", w.Limit, "high_water", HighWater)
	}
	w.pressed = true
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
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tableproxy_memory_over_limit",
			Help: "1 while the live heap stays past the high-water mark of memory_limit after shedding: new clients are refused."},
			func() float64 {
				if w.Over() {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tableproxy_memory_sheds_total",
			Help: "Times the caches were shed because the live heap passed the high-water mark of memory_limit."},
			func() float64 { return float64(w.sheds.Load()) }),
	}
}
