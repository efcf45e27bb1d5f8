package cache

// The proxy-wide memory budget of cached tables (option max_total_size),
// besides each table's cap (max_table_size): a sidecar holds every table
// the cluster caches, so the sum is what sizes its container. CACHE is
// refused past it, and a table whose copy would not fit is not loaded
// here (its reads go to the backend) while it stays cached in the
// cluster: another proxy may have the room.

import (
	"errors"
	"fmt"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/prometheus/client_golang/prometheus"

	"tableproxy/cache/load"
	"tableproxy/configs"
	"tableproxy/lease"
)

// defaultMaxTotalSize is max_total_size's default: a table at the 64 MB
// cap may take up to twice that in memory, so 256 MB holds the largest
// table with room for a few small ones, and keeps a sidecar (about 30 MB
// idle) within a 512 MiB container limit.
const defaultMaxTotalSize = "256MB"

// errOverBudget is a load refused for the budget.
var errOverBudget = errors.New("over the proxy's memory budget for cached tables")

// parseBudget reads max_total_size; 0 means no budget.
func parseBudget(opts Options) (int64, error) {
	if opts.MaxTotalSize == "" {
		return 0, nil
	}
	n, err := configs.ParseByteSize(opts.MaxTotalSize)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("max_total_size: %q: want a size like 256MB (0: no budget)", opts.MaxTotalSize)
	}
	return n, nil
}

// memoryInUse is the memory of the loaded copies of every cached table
// but except.
func (p *Plugin) memoryInUse(except lease.TableID) int64 {
	var n int64
	for id, ts := range p.cachedTables() {
		if s := ts.snap.Load(); s != nil && id != except {
			n += s.Bytes
		}
	}
	return n
}

// copyEstimate is what the copy of a table whose data takes size bytes on
// the backend (InnoDB's DATA_LENGTH) may take in memory, erring high: a
// copy has taken up to a fifth more than the backend's figure (its
// per-value offsets, the index of its primary key).
func copyEstimate(size int64) int64 { return size + size/4 }

// overBudget refuses to cache id, whose copy would take about size
// bytes, if that would take the loaded copies past the budget.
// Copies still loading are not counted: the load of one that does not fit
// then fails, and says so in tableproxy.cached_tables.
func (p *Plugin) overBudget(id lease.TableID, size int64) *mysql.MyError {
	if p.budget <= 0 {
		return nil
	}
	used := p.memoryInUse(id)
	if used+size <= p.budget {
		return nil
	}
	p.overBudgetN.Add(1)
	// ER_RECORD_FILE_FULL is what a MEMORY table past max_heap_table_size
	// answers: the nearest thing the server has to this.
	return mysql.NewError(mysql.ER_RECORD_FILE_FULL, fmt.Sprintf(
		"tableproxy cache: caching %s (about %s) would take the cached tables' memory past the cache option max_total_size (%s; %s in use)",
		id, mib(size), mib(p.budget), mib(used)))
}

// loadLimit is the most a copy of id may take: twice the table cap (the
// in-memory form may cost that), or what the budget leaves, whichever is
// less; budgeted says the budget set it.
func (p *Plugin) loadLimit(id lease.TableID) (limit int64, budgeted bool) {
	limit = p.maxBytes * 2
	if p.budget <= 0 {
		return limit, false
	}
	if left := p.budget - p.memoryInUse(id); left < limit {
		return max(left, 0), true
	}
	return limit, false
}

// loadOverBudget handles a load that the budget stopped: the table stays
// cached in the cluster, its reads go to the backend here, and it is tried
// again later. It reports whether err was that.
func (p *Plugin) loadOverBudget(ts *tableState, err error, budgeted bool) bool {
	var tooLarge *load.ErrTooLarge
	if !budgeted || !errors.As(err, &tooLarge) {
		return false
	}
	p.overBudgetN.Add(1)
	msg := fmt.Sprintf("%s: %v (max_total_size %s, %s in use by the others); its reads go to the backend; loaded again when it is written, or when another table's copy goes",
		errOverBudget, err, mib(p.budget), mib(p.memoryInUse(ts.entry.ID())))
	ts.lastErr.Store(&msg)
	ts.snap.Store(nil)
	p.log.Warn("cache: a table does not fit in the memory budget; its reads go to the backend", "table", ts.entry.ID().String(),
		"max_total_size", p.budget, "err", err)
	// Not read again on a timer: a table that does not fit would be read
	// from the backend, whole, again and again.
	ts.awaitsRoom.Store(true)
	return true
}

// budgetMetrics are the budget's gauges and counter.
func (p *Plugin) budgetMetrics() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tableproxy_cache_memory_bytes",
			Help: "Memory of the cached tables' loaded copies."}, func() float64 { return float64(p.memoryInUse(lease.TableID{})) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tableproxy_cache_memory_budget_bytes",
			Help: "The cache option max_total_size (0: no budget)."}, func() float64 { return float64(p.budget) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tableproxy_cache_over_budget_total",
			Help: "CACHE statements refused and loads not done for max_total_size."}, func() float64 { return float64(p.overBudgetN.Load()) }),
	}
}

func mib(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/(1<<20)) }
