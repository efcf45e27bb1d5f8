package cache

import (
	"sync/atomic"
	"testing"
)

// follower is a lease manager of a cluster member that does not lead: the
// leader follows the binary log, and says whether it has caught up.
type follower struct {
	*memLeases
	watched atomic.Bool
}

func (f *follower) FollowBinlog() bool    { return false }
func (f *follower) SetBinlogWatched(bool) {}
func (f *follower) BinlogWatched() bool   { return f.watched.Load() }

// A follower answers from memory only while the leader says it follows the
// binary log: otherwise writes that bypass the proxies may be unseen.
func TestFollowerServesOnlyWhileTheLogIsWatched(t *testing.T) {
	f := newResultsFixture(t)
	f.p.opts.AcceptStaleRisk = false
	m := &follower{memLeases: f.p.leases.(*memLeases)}
	f.p.leases = m
	if _, ok := f.p.Servable(f.id); ok {
		t.Fatal("servable before the leader said it watches the log")
	}
	m.watched.Store(true)
	if _, ok := f.p.Servable(f.id); !ok {
		t.Fatal("not servable while the leader watches the log")
	}
	m.watched.Store(false)
	if _, ok := f.p.Servable(f.id); ok {
		t.Fatal("servable after the leader said its stream stalled")
	}
}

// When the stream breaks or starts again, what it may have missed includes
// GRANT and REVOKE: the privileges' version goes up with every table's.
func TestMissedLogBumpsPrivileges(t *testing.T) {
	f := newResultsFixture(t)
	priv, acc, tbl := f.p.leases.Table(privilegesID), f.p.leases.Table(accountsID), f.p.leases.Table(f.id)
	pv, av, tv := priv.Version(), acc.Version(), tbl.Version()
	f.p.invalidateAll()
	if priv.Version() <= pv || acc.Version() <= av || tbl.Version() <= tv {
		t.Fatalf("privileges v%d -> v%d, accounts v%d -> v%d, table v%d -> v%d", pv, priv.Version(), av, acc.Version(), tv, tbl.Version())
	}
}
