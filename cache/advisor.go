package cache

import (
	"context"
	"time"

	"tableproxy/cache/eval"
	"tableproxy/cache/load"
	"tableproxy/lease"
	"tableproxy/plugins"
)

// What the query digests and their cache advisor (package digest) ask of
// the cache: how it decided a statement, and how it would plan a
// statement were a table cached. The answers come from the code that
// serves reads, so the advisor predicts the cache's own decision rather
// than a second classifier's.

// Decision is how the cache decided the statement st, read in an
// observer's OnResult: served (answered by the cache), from the result
// cache rather than the evaluator, and the reason the evaluator did not
// answer it (eval.NoReason when it did). It is only meaningful for a
// statement the cache saw: one the backend answered, or the cache did.
func (p *Plugin) Decision(st *plugins.Statement) (served, fromResults bool, reason eval.PassReason) {
	si, ok := st.Session.Get(sessionKey{}).(*sessionInfo)
	if !ok {
		return false, false, eval.NothingCached
	}
	why := si.last.why
	// The result cache answers only what the evaluator declined, so its
	// answers keep the evaluator's reason (declinedWhy).
	return si.last.served, si.last.served && why.Reason != eval.NoReason, why.Reason
}

// PlanWhy plans a statement as the cache would were the tables lookup
// returns a definition of cached (the others are not, whatever the cache
// holds now): the reason the evaluator would leave it to the backend, or
// a Why with eval.NoReason when it would answer it. sql is a statement as
// a client sends it (its literals are taken out as the serving path
// does), or a prepared statement's text when prepared.
func (p *Plugin) PlanWhy(sql string, prepared bool, db string, lookup func(lease.TableID) *eval.Snapshot) eval.Why {
	if plugins.Classify(sql) != plugins.KindSelect {
		return eval.Because(eval.NotSelect, "not a SELECT: statements other than SELECT always go to the backend")
	}
	text := sql
	if !prepared {
		if tmpl, _, ok := eval.TemplateOf(sql, nil, nil); ok {
			text = string(tmpl)
		}
	}
	ent := planWith(text, db, func(id lease.TableID) (*eval.Snapshot, bool) {
		s := lookup(id)
		return s, s != nil
	})
	switch {
	case ent == nil:
		return eval.Because(eval.TableLoading, "a table it reads has no definition")
	case ent.writes && !ent.why.Declined():
		return eval.Because(eval.StoredFunction, "it calls a stored function, which may write: a write of every cached table")
	}
	return ent.why
}

// Definition reads id's definition (no rows) as user, for PlanWhy.
func (p *Plugin) Definition(ctx context.Context, user string, id lease.TableID) (*eval.Snapshot, error) {
	conn, err := p.backend.Connect(ctx, user, "")
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return load.Definition(ctx, conn, id, p.colls)
}

// Copy is the loaded copy of a cached table, or nil (not cached, or not
// loaded yet).
func (p *Plugin) Copy(id lease.TableID) *eval.Snapshot {
	if ts := p.table(id); ts != nil {
		return ts.snap.Load()
	}
	return nil
}

// IsCached reports whether id is cached (loaded or not).
func (p *Plugin) IsCached(id lease.TableID) bool { return p.table(id) != nil }

// MaxTableSize is the largest table the cache takes (max_table_size).
func (p *Plugin) MaxTableSize() int64 { return p.maxBytes }

// WriteCost is the mean time a write intent took to open (the revocation
// of every other proxy's lease on the table, through the cluster), over
// the n writes of cached tables this proxy has run.
func (p *Plugin) WriteCost() (mean time.Duration, n uint64) {
	n = p.intents.Load()
	if n == 0 {
		return 0, 0
	}
	return time.Duration(p.intentNanos.Load() / n), n
}
