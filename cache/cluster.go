package cache

import (
	"tableproxy/lease"
	"tableproxy/plugins"
)

// CatalogSource is where the list of cached tables lives: a file in the
// data directory on one proxy (*Catalog), the replicated log in a cluster.
type CatalogSource interface {
	List() []Entry
	Put(Entry) error
	Delete(lease.TableID) (bool, error)
}

// catalogWatcher is a CatalogSource that other proxies change too: the
// cache follows its changes.
type catalogWatcher interface {
	OnChange(fn func())
}

// binlogRole is a lease.Manager in a cluster, where one proxy (the leader)
// follows the binary log and proposes the version bumps for everyone. It
// tells the others whether it is watching (SetBinlogWatched): they answer
// from memory only while it is (BinlogWatched).
type binlogRole interface {
	FollowBinlog() bool
	SetBinlogWatched(ok bool)
	BinlogWatched() bool
}

// Cluster is what a cluster of proxies gives the cache instead of its
// single-node defaults.
type Cluster struct {
	Leases  lease.Manager
	Catalog CatalogSource
}

// NewFactory returns the cache plugin's factory for a cluster.
func NewFactory(c Cluster) plugins.Factory {
	return func(raw plugins.Options, env plugins.Env) (plugins.Plugin, error) {
		opts, limit, err := parseOptions(raw, env)
		if err != nil {
			return nil, err
		}
		return build(env, c.Leases, c.Catalog, limit, opts), nil
	}
}

// followCatalog keeps the cached tables equal to a shared catalog's.
func (p *Plugin) followCatalog() {
	w, ok := p.catalog.(catalogWatcher)
	if !ok {
		return
	}
	w.OnChange(func() {
		list := p.catalog.List()
		want := map[lease.TableID]bool{}
		for _, e := range list {
			want[e.ID()] = true
			if p.table(e.ID()) == nil {
				p.addTable(e)
				p.startWatcher(e.CachedBy)
			}
		}
		for _, id := range p.cachedIDs() {
			if !want[id] {
				p.removeTable(id)
			}
		}
	})
}

// followsBinlogHere reports whether this proxy should follow the binary
// log: always on one proxy, only on the leader of a cluster.
func (p *Plugin) followsBinlogHere() bool { return p.viaLeader() == nil }

// viaLeader returns the cluster's role when another proxy, the leader,
// follows the binary log for this one; nil when this proxy follows it.
func (p *Plugin) viaLeader() binlogRole {
	if r, ok := p.leases.(binlogRole); ok && !r.FollowBinlog() {
		return r
	}
	return nil
}
