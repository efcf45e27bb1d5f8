package cache

import (
	"strings"

	"tableproxy/cache/eval"
	"tableproxy/internal/mysqlwire"
	"tableproxy/lease"
	"tableproxy/plugins"
)

// A session's temporary table hides the base table of its name from that
// session: its reads of the name are the temporary table's, which the
// proxy does not hold. So a read of a cached table is answered in memory
// only when the session has no temporary table of that name.
//
// CREATE TEMPORARY TABLE and DROP [TEMPORARY] TABLE name theirs, and the
// session's set follows them. Other statements may create or drop
// temporary tables the proxy cannot see (CALL, EXECUTE, a stored function,
// RENAME, anything it cannot parse); after one of them, each cached table
// is checked once with SHOW CREATE TABLE, which shows the temporary table
// when there is one, before the session next reads it from memory.
//
// Names are compared without regard to case: with lower_case_table_names
// set, the backend does the same.

// sessionTemps is a session's knowledge of its temporary tables.
type sessionTemps struct {
	known map[string]bool // tempKey: the session has a temporary table of this name
	// unknown: a statement may have created temporary tables the proxy
	// cannot name; checked lists the cached tables looked up since.
	unknown bool
	checked map[string]bool
	// pending is what the statement being handled does to temporary
	// tables, applied once the backend has answered it.
	pending bool
	created []lease.TableID
	dropped []lease.TableID
}

func tempKey(id lease.TableID) string {
	return strings.ToLower(id.Schema) + "\x00" + strings.ToLower(id.Table)
}

// has reports whether the session is known to have a temporary table
// named id.
func (t *sessionTemps) has(id lease.TableID) bool {
	return len(t.known) > 0 && t.known[tempKey(id)]
}

// opaque records a statement that may create or drop temporary tables
// the proxy cannot name: every cached table is checked again.
func (t *sessionTemps) opaque() {
	t.unknown = true
	clear(t.checked)
}

// expect records what the statement being handled does to temporary
// tables, per its analysis.
func (t *sessionTemps) expect(a plugins.Analysis) {
	if a.TempsUnknown {
		t.opaque()
	}
	t.pending = len(a.TempCreated)+len(a.TempDropped) > 0
	t.created, t.dropped = leaseIDs(a.TempCreated), leaseIDs(a.TempDropped)
}

// answered applies the statement's effect once the backend has answered
// it (ok: without an error).
func (t *sessionTemps) answered(ok bool) {
	if !t.pending {
		return
	}
	t.pending = false
	if !ok {
		// Which of them it did is unknown: look again.
		t.opaque()
		return
	}
	for _, id := range t.dropped {
		delete(t.known, tempKey(id))
	}
	for _, id := range t.created {
		if t.known == nil {
			t.known = map[string]bool{}
		}
		t.known[tempKey(id)] = true
	}
	t.created, t.dropped = nil, nil
}

// reset forgets everything: the session's state was reset.
func (t *sessionTemps) reset() { *t = sessionTemps{} }

// shadowed reports whether a temporary table of st's session hides cached
// table id (or may: when it cannot be looked up, it counts as hidden).
func (p *Plugin) shadowed(st *plugins.Statement, si *sessionInfo, id lease.TableID) bool {
	t := &si.temps
	if t.has(id) {
		return true
	}
	if !t.unknown {
		return false
	}
	k := tempKey(id)
	if t.checked[k] {
		return false
	}
	if st.Backend == nil {
		return true
	}
	r, err := st.Backend.Query("SHOW CREATE TABLE " + mysqlwire.QuoteTable(id.Schema, id.Table))
	if err != nil {
		return true
	}
	defer r.Close()
	def := eval.ResultString(r, 0, 1)
	if strings.HasPrefix(def, "CREATE TEMPORARY TABLE") {
		if t.known == nil {
			t.known = map[string]bool{}
		}
		t.known[k] = true
		return true
	}
	if !strings.HasPrefix(def, "CREATE TABLE") {
		return true // a view, or something else: not the cached table
	}
	if t.checked == nil {
		t.checked = map[string]bool{}
	}
	t.checked[k] = true
	return false
}
