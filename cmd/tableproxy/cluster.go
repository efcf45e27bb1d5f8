package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"tableproxy/cache"
	"tableproxy/cluster"
	"tableproxy/configs"
	"tableproxy/lease"
)

// clusterNode is this process's cluster member and what the plugins take
// from it.
type clusterNode struct {
	node    *cluster.Node
	leases  *lease.Raft
	catalog *catalog
}

// leaseConfig is the lease terms cfg sets, over lease's defaults.
func leaseConfig(cfg configs.Config) lease.RaftConfig {
	lc := lease.DefaultRaftConfig()
	if cfg.Cluster.Lease > 0 {
		lc.Lease = cfg.Cluster.Lease
		lc.RenewEvery = lc.Lease / 4
	}
	if cfg.Cluster.LeaseMargin > 0 {
		lc.Margin = cfg.Cluster.LeaseMargin
	}
	return lc
}

// checkCluster checks what configs.Validate cannot, since it needs the
// lease's defaults: a member is removed only once its lease has run out.
func checkCluster(cfg configs.Config) error {
	if d, hold := cfg.Cluster.RemoveDeadAfter, leaseConfig(cfg).Hold(); d > 0 && d <= hold {
		return fmt.Errorf("cluster.remove_dead_after: %s must be longer than cluster.lease plus cluster.lease_margin (%s)", d, hold)
	}
	return nil
}

// startCluster opens the Raft node and starts the lease manager on it.
// Close stops both.
func startCluster(cfg configs.Config, log *slog.Logger) (*clusterNode, error) {
	var tlsConf *cluster.TLSConfigs
	if t := cfg.Cluster.TLS; t.On() {
		var err error
		if tlsConf, err = cluster.LoadTLS(cluster.TLSFiles{Cert: t.Cert, Key: t.Key, CA: t.CA}); err != nil {
			return nil, err
		}
	}
	lc := leaseConfig(cfg)
	lc.Logger = log
	leases := lease.NewRaft(lc)
	cat := &catalog{changed: make(chan struct{}, 1)}
	n, err := cluster.Open(cluster.Config{
		ID: cfg.Cluster.NodeID, RaftListen: cfg.Cluster.RaftListen, DataDir: cfg.DataDir,
		Join: cfg.Cluster.Join, NonVoter: cfg.Cluster.NonVoter, Logger: log,
		DeadAfter: cfg.Cluster.RemoveDeadAfter, Leases: leases, CatalogChanged: cat.poke, TLS: tlsConf,
	})
	if err != nil {
		return nil, err
	}
	cat.n = n
	leases.Start(n)
	go importCatalog(n, cat, cfg.DataDir, log)
	return &clusterNode{node: n, leases: leases, catalog: cat}, nil
}

// cache is the cluster as the cache plugin takes it.
func (c *clusterNode) cache() cache.Cluster {
	return cache.Cluster{Leases: c.leases, Catalog: c.catalog}
}

// Close stops the lease manager (this proxy serves nothing from memory
// from then on), then, for a non-voter, asks the cluster to remove it at
// once (a sidecar stopping is a pod going away: its replacement comes
// with a new id), then stops the node.
func (c *clusterNode) Close() {
	c.leases.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	if err := c.node.Leave(ctx); err != nil {
		slog.Warn("cluster: could not leave; the leader removes this member once cluster.remove_dead_after has passed", "err", err)
	}
	cancel()
	c.catalog.close()
	c.node.Close()
}

// catalog is the cache's catalog kept in the cluster's log.
type catalog struct {
	n       *cluster.Node
	changed chan struct{}

	mu   sync.Mutex
	fns  []func()
	once sync.Once
	stop chan struct{}
}

func (c *catalog) List() []cache.Entry {
	var out []cache.Entry
	for _, e := range c.n.Catalog() {
		out = append(out, cache.Entry{Schema: e.Schema, Table: e.Table, CachedBy: e.CachedBy, Since: e.Since, Index: e.Index, Pending: e.Pending})
	}
	return out
}

func (c *catalog) Put(e cache.Entry) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.n.CacheTable(ctx, cluster.CatalogEntry{Schema: e.Schema, Table: e.Table, CachedBy: e.CachedBy, Since: e.Since})
}

func (c *catalog) Delete(id lease.TableID) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return true, c.n.NoCacheTable(ctx, id)
}

// Learned tells the node what its renewals say this proxy has learned.
func (c *catalog) Learned(index uint64) { c.n.SetLearned(index) }

// OnChange calls fn, from one goroutine, after the catalog changed
// (coalescing bursts), never from the log's applier. The cache that
// follows the catalog says what it has learned of it (Learned).
func (c *catalog) OnChange(fn func()) {
	c.n.TrackLearned()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fns = append(c.fns, fn)
	c.once.Do(func() {
		c.stop = make(chan struct{})
		stop := c.stop
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-c.changed:
				}
				c.mu.Lock()
				fns := c.fns
				c.mu.Unlock()
				for _, f := range fns {
					f()
				}
			}
		}()
	})
}

func (c *catalog) poke() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

func (c *catalog) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stop != nil {
		close(c.stop)
		c.stop = nil
	}
}

// importCatalog moves the tables a single-node proxy of an earlier version
// cached (a file in the data directory) into the replicated catalog, once,
// if the cluster has none yet.
func importCatalog(n *cluster.Node, cat *catalog, dataDir string, log *slog.Logger) {
	old, err := cache.OpenCatalog(dataDir)
	if err != nil || len(old.List()) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if n.WaitLeader(ctx) != nil || len(n.Catalog()) > 0 {
		return
	}
	for _, e := range old.List() {
		if err := cat.Put(e); err != nil {
			log.Warn("cluster: could not import a cached table from the old catalog file", "table", e.ID().String(), "err", err)
			return
		}
		_, _ = old.Delete(e.ID())
	}
	log.Info("cluster: imported the catalog of cached tables from the data directory")
}
