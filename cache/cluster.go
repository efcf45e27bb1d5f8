package cache

import (
	"tableproxy/lease"
	"tableproxy/plugins"
)

// CatalogSource is where the list of cached tables lives: the cluster's
// replicated log, which every proxy of the cluster changes.
type CatalogSource interface {
	List() []Entry
	Put(Entry) error
	Delete(lease.TableID) (bool, error)
	// OnChange calls fn after the list changed, here or on another proxy:
	// the cache follows it.
	OnChange(fn func())
}

// Leases is the lease manager the cache runs on. In a cluster one proxy,
// the leader, follows the binary log and proposes the version bumps for
// everyone (FollowBinlog); it tells the others whether it is watching
// (SetBinlogWatched), and they answer from memory only while it is
// (BinlogWatched).
type Leases interface {
	lease.Manager
	FollowBinlog() bool
	SetBinlogWatched(ok bool)
	BinlogWatched() bool
}

// Cluster is what the proxies' cluster gives the cache.
type Cluster struct {
	Leases  Leases
	Catalog CatalogSource
}

// Open builds the cache plugin from its options, on a cluster's leases
// and catalog.
func Open(raw plugins.Options, env plugins.Env, c Cluster) (*Plugin, error) {
	opts, limit, err := parseOptions(raw, env)
	if err != nil {
		return nil, err
	}
	return build(env, c.Leases, c.Catalog, limit, opts), nil
}

// followCatalog keeps the cached tables equal to a shared catalog's.
func (p *Plugin) followCatalog() {
	p.catalog.OnChange(func() {
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
func (p *Plugin) viaLeader() Leases {
	if !p.leases.FollowBinlog() {
		return p.leases
	}
	return nil
}
