package cache

import (
	"context"
	"errors"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/internal/sizedlru"
	"tableproxy/lease"
	"tableproxy/plugins"
)

// noQuorum is a lease manager that cannot open intents (a cluster without a
// quorum), and whose version bumps are applied here only while apply is
// true (a follower that has not yet applied a bump the leader committed).
type noQuorum struct {
	*memLeases
	apply bool
}

func (m *noQuorum) BeginWrite(context.Context, ...lease.TableID) (*lease.Intent, error) {
	return nil, errors.New("no leader")
}

func (m *noQuorum) Invalidate(id lease.TableID) lease.Version {
	if m.apply {
		return m.memLeases.Invalidate(id)
	}
	return m.memLeases.Table(id).Version() + 1
}

// A write that no intent covers keeps this proxy off the table until it
// has been answered, and a copy loaded meanwhile, even at the version the
// lease names, is never served after it.
func TestUnguardedWriteIsNotServedAround(t *testing.T) {
	f := newResultsFixture(t)
	m := &noQuorum{memLeases: f.p.leases.(*memLeases), apply: true}
	f.p.leases = m
	f.p.effects = sizedlru.New[planKey, plugins.Analysis](1<<20, 16)
	if _, ok := f.p.Servable(f.id); !ok {
		t.Fatal("the loaded table is not servable before the write")
	}

	w := plugins.Statement{ConnID: 8, User: "app", DB: "shop", Session: &plugins.SessionState{}, Backend: f.sess, Tx: f.sess}
	w.Reset(plugins.ComQuery, "UPDATE rates SET code = 'GBP' WHERE code = 'EUR'")
	if a := f.p.OnStatement(&w); a.Verdict != plugins.Pass {
		t.Fatalf("the write was not passed on: %v", a.Verdict)
	}
	if _, ok := f.p.Servable(f.id); ok {
		t.Fatal("servable while an unguarded write is in flight")
	}
	// The bump made before the write commits and the proxy reloads the
	// table, before the write has landed: the copy holds the old row.
	f.reloadAtEpoch()
	if _, ok := f.p.Servable(f.id); ok {
		t.Fatal("a copy loaded during the unguarded write is servable before its answer")
	}

	// The write is answered; the bump made after it is not applied here yet.
	m.apply = false
	f.p.OnResult(&w, &plugins.Outcome{Source: plugins.FromBackend, Status: mysql.SERVER_STATUS_AUTOCOMMIT})
	if s, ok := f.p.Servable(f.id); ok {
		t.Fatalf("the copy loaded before the write landed is served after its answer (version %d)", s.Version)
	}

	// A load that begins after the write serves again.
	f.reloadAtEpoch()
	if _, ok := f.p.Servable(f.id); !ok {
		t.Fatal("a copy loaded after the write is not servable")
	}
}

// reloadAtEpoch loads the table at its current version, as a load that
// begins now does.
func (f *resultsFixture) reloadAtEpoch() {
	f.reload()
	f.ts.snap.Load().Epoch = f.ts.epoch.Load()
}
