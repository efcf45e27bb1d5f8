package cluster

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"tableproxy/lease"
)

// op is what one log entry does. The log never carries table data.
type op string

const (
	opRenew   op = "renew"   // a proxy renews its lease (and says where to revoke it)
	opOpen    op = "open"    // a write intent opens on some tables
	opClose   op = "close"   // a write intent ends: its tables' versions go up
	opBump    op = "bump"    // versions go up for writes that bypassed the proxies
	opCache   op = "cache"   // a table joins the catalog of cached tables
	opNoCache op = "nocache" // a table leaves it
	opForget  op = "forget"  // a node was removed: drop its lease and its intents
)

// command is one log entry, JSON-encoded.
type command struct {
	Op      op              `json:"op"`
	Node    string          `json:"node,omitempty"`
	Inc     uint64          `json:"inc,omitempty"`  // the node's incarnation (one per process start)
	Addr    string          `json:"addr,omitempty"` // where the node answers revocations
	Intent  string          `json:"intent,omitempty"`
	Applied uint64          `json:"applied,omitempty"` // the node's applied index, for cluster_members
	Tables  []lease.TableID `json:"tables,omitempty"`
	Entry   *CatalogEntry   `json:"entry,omitempty"`
	// Bumps raises these tables' versions too, whatever Op is: bumps the
	// leader deferred ride on the next entry it writes (see Node.Bump).
	Bumps []lease.TableID `json:"bumps,omitempty"`
	// Watching, whatever Op is, is the leader Node saying whether it
	// follows the backend's binary log and has caught up with it (see
	// Node.SetBinlogWatched). It rides on an empty bump, which a node
	// that does not know the field applies as nothing.
	Watching *bool `json:"watching,omitempty"`
}

// CatalogEntry is one cached table in the replicated catalog.
type CatalogEntry struct {
	Schema   string    `json:"schema"`
	Table    string    `json:"table"`
	CachedBy string    `json:"cached_by"`
	Since    time.Time `json:"since"`
}

// ID is the entry's table.
func (e CatalogEntry) ID() lease.TableID { return lease.TableID{Schema: e.Schema, Table: e.Table} }

// binlogRec is what a leader last said of the backend's binary log, with
// the term of the entry that said it. It holds only while that term is
// the current one and its speaker leads (see Node.BinlogWatched): the next
// leader has not caught up until it says so itself.
type binlogRec struct {
	Node     string `json:"node"`
	Inc      uint64 `json:"inc"`
	Term     uint64 `json:"term"`
	Watching bool   `json:"watching"`
}

type intentRec struct {
	Node   string          `json:"node"`
	Inc    uint64          `json:"inc"`
	Tables []lease.TableID `json:"tables"`
}

type tableRec struct {
	Version lease.Version `json:"version"`
	Intents int           `json:"intents"`
}

type memberRec struct {
	Addr    string `json:"addr"`
	Inc     uint64 `json:"inc"`
	Applied uint64 `json:"applied"`
	// renewed is when this node applied the member's last renewal, by its
	// own monotonic clock. Not replicated: only a leader uses it, to know
	// when a lease it cannot revoke has expired. It is always later than
	// the moment the member started the renewal, which is what the member
	// counts its lease from, so the leader's view errs on the long side.
	renewed time.Time
}

// state is everything the log carries.
type state struct {
	Tables  map[lease.TableID]*tableRec    `json:"-"`
	Catalog map[lease.TableID]CatalogEntry `json:"-"`
	Intents map[string]intentRec           `json:"intents"`
	Members map[string]*memberRec          `json:"members"`
	// Closed lists the intents closed last, oldest first, so that an open
	// that commits after its own close (a retried proposal that was still
	// on its way) is ignored instead of keeping the tables off memory
	// until its proxy restarts. Bounded: such a retry is seconds old at
	// most.
	Closed []string `json:"closed,omitempty"`
	closed map[string]bool
	// Binlog is what a leader last said of the binary log.
	Binlog binlogRec      `json:"binlog"`
	TableL []tableSnap    `json:"tables"`
	CatL   []CatalogEntry `json:"catalog"`
}

type tableSnap struct {
	ID lease.TableID `json:"id"`
	tableRec
}

func newState() *state {
	return &state{Tables: map[lease.TableID]*tableRec{}, Catalog: map[lease.TableID]CatalogEntry{},
		Intents: map[string]intentRec{}, Members: map[string]*memberRec{}, closed: map[string]bool{}}
}

// publishBinlog makes st's word the one the read path sees; f.mu is held.
func (f *fsm) publishBinlog(st *state) {
	b := st.Binlog
	f.binlog.Store(&b)
}

// keepClosed is how many closed intent names the state remembers.
const keepClosed = 4096

// remember records a closed intent's name, forgetting the oldest beyond
// keepClosed; every node does the same in log order, so the states agree.
func (st *state) remember(name string) {
	if st.closed[name] {
		return
	}
	st.closed[name] = true
	st.Closed = append(st.Closed, name)
	if len(st.Closed) > keepClosed {
		delete(st.closed, st.Closed[0])
		st.Closed = st.Closed[1:]
	}
}

// Events receives what the log changed, in log order, from the goroutine
// that applies it. lease.Raft implements it.
type Events interface {
	TableState(id lease.TableID, v lease.Version, intents int)
	// IntentApplied names an intent whose open or close was applied (after
	// the TableState calls of that entry).
	IntentApplied(name string)
	Applied(index uint64)
	CatalogChanged()
}

// fsm applies the log. It is not public API: only Node reaches it.
type fsm struct {
	ev  Events
	now func() time.Time
	// idle is called after an entry left some table without open intents
	// (the node flushes the bumps it deferred on it).
	idle func()

	mu sync.RWMutex // guards st; Apply writes, readers (members, catalog, leases) read
	st *state
	// binlog is a copy of st.Binlog for the read path. A word that the
	// log is watched is published only after its entry's versions are
	// (see Apply); one that it is not, at once.
	binlog atomic.Pointer[binlogRec]
}

func newFSM(ev Events) *fsm { return &fsm{ev: ev, now: time.Now, st: newState()} }

// Apply panics on an entry it cannot decode: a corrupt log must not be
// skipped silently, since a skipped intent would let a stale copy be served.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	var c command
	if err := json.Unmarshal(l.Data, &c); err != nil {
		panic(fmt.Sprintf("cluster: undecodable log entry %d: %v", l.Index, err))
	}
	changed, intents, catalog := f.apply(c, l.Term)
	for id, t := range changed {
		f.ev.TableState(id, t.Version, t.Intents)
	}
	for _, name := range intents {
		f.ev.IntentApplied(name)
	}
	if f.idle != nil {
		for _, t := range changed {
			if t.Intents == 0 {
				f.idle()
				break
			}
		}
	}
	if catalog {
		f.ev.CatalogChanged()
	}
	if c.Watching != nil {
		f.mu.RLock()
		f.publishBinlog(f.st)
		f.mu.RUnlock()
	}
	f.ev.Applied(l.Index)
	return nil
}

// apply changes the state for c, an entry of term, and returns the tables
// it changed (copies), the intents it opened or closed, and whether the
// catalog changed.
func (f *fsm) apply(c command, term uint64) (map[lease.TableID]tableRec, []string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.st
	if c.Watching != nil {
		st.Binlog = binlogRec{Node: c.Node, Inc: c.Inc, Term: term, Watching: *c.Watching}
		if !st.Binlog.Watching {
			f.publishBinlog(st)
		}
	}
	changed := map[lease.TableID]tableRec{}
	var intents []string
	table := func(id lease.TableID) *tableRec {
		t := st.Tables[id]
		if t == nil {
			t = &tableRec{Version: 1}
			st.Tables[id] = t
		}
		return t
	}
	closeIntent := func(name string) {
		// Named even when it was never open here: a revocation that
		// waits for an intent whose open failed ends with its close.
		intents = append(intents, name)
		st.remember(name)
		in, ok := st.Intents[name]
		if !ok {
			return
		}
		delete(st.Intents, name)
		for _, id := range in.Tables {
			t := table(id)
			t.Version++
			if t.Intents > 0 {
				t.Intents--
			}
			changed[id] = *t
		}
	}
	// dropIntents closes node's intents from incarnations other than keep:
	// their process is gone, and the backend rolled back or finished its
	// statements when their connections closed.
	dropIntents := func(node string, keep uint64) {
		var names []string
		for name, in := range st.Intents {
			if in.Node == node && in.Inc != keep {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		for _, name := range names {
			closeIntent(name)
		}
	}
	for _, id := range c.Bumps {
		t := table(id)
		t.Version++
		changed[id] = *t
	}
	catalog := false
	switch c.Op {
	case opRenew:
		m := st.Members[c.Node]
		if m == nil {
			m = &memberRec{}
			st.Members[c.Node] = m
		}
		if m.Inc != c.Inc {
			dropIntents(c.Node, c.Inc)
		}
		m.Addr, m.Inc, m.Applied, m.renewed = c.Addr, c.Inc, c.Applied, f.now()
	case opOpen:
		intents = append(intents, c.Intent)
		if _, dup := st.Intents[c.Intent]; dup || st.closed[c.Intent] {
			break // a retried open, or one that lost the race with its close
		}
		st.Intents[c.Intent] = intentRec{Node: c.Node, Inc: c.Inc, Tables: c.Tables}
		for _, id := range c.Tables {
			t := table(id)
			t.Intents++
			changed[id] = *t
		}
	case opClose:
		closeIntent(c.Intent)
	case opBump:
		for _, id := range c.Tables {
			t := table(id)
			t.Version++
			changed[id] = *t
		}
	case opCache:
		if c.Entry != nil {
			if _, had := st.Catalog[c.Entry.ID()]; !had {
				st.Catalog[c.Entry.ID()] = *c.Entry
				catalog = true
			}
		}
	case opNoCache:
		for _, id := range c.Tables {
			if _, had := st.Catalog[id]; had {
				delete(st.Catalog, id)
				catalog = true
			}
		}
	case opForget:
		delete(st.Members, c.Node)
		dropIntents(c.Node, 0)
	default:
		panic(fmt.Sprintf("cluster: unknown log operation %q", c.Op))
	}
	return changed, intents, catalog
}

// fsmSnapshot is the state, encoded when the snapshot was taken.
type fsmSnapshot struct{ data []byte }

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	st := *f.st
	st.TableL = nil
	for id, t := range f.st.Tables {
		st.TableL = append(st.TableL, tableSnap{ID: id, tableRec: *t})
	}
	st.CatL = nil
	for _, e := range f.st.Catalog {
		st.CatL = append(st.CatL, e)
	}
	data, err := json.Marshal(&st)
	if err != nil {
		return nil, err
	}
	return &fsmSnapshot{data: data}, nil
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s.data); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}

// Restore replaces the state. Versions in a snapshot are never lower than
// the ones it replaces (the log only increments them), and lease.Raft keeps
// the highest version it was ever told, so a restore cannot move a table
// back.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st := newState()
	if err := json.NewDecoder(rc).Decode(st); err != nil {
		return fmt.Errorf("cluster: snapshot: %w", err)
	}
	if st.Intents == nil {
		st.Intents = map[string]intentRec{}
	}
	if st.Members == nil {
		st.Members = map[string]*memberRec{}
	}
	for _, name := range st.Closed {
		st.closed[name] = true
	}
	now := f.now()
	for _, m := range st.Members {
		m.renewed = now // unknown: assume the longest lease
	}
	for _, t := range st.TableL {
		rec := t.tableRec
		st.Tables[t.ID] = &rec
	}
	for _, e := range st.CatL {
		st.Catalog[e.ID()] = e
	}
	st.TableL, st.CatL = nil, nil
	f.mu.Lock()
	f.st = st
	f.binlog.Store(nil) // until the tables' versions are told
	tables := make(map[lease.TableID]tableRec, len(st.Tables))
	for id, t := range st.Tables {
		tables[id] = *t
	}
	f.mu.Unlock()
	for id, t := range tables {
		f.ev.TableState(id, t.Version, t.Intents)
	}
	f.ev.CatalogChanged()
	f.mu.RLock()
	f.publishBinlog(f.st)
	f.mu.RUnlock()
	return nil
}

// catalog lists the cached tables, by schema and table.
func (f *fsm) catalog() []CatalogEntry {
	f.mu.RLock()
	list := make([]CatalogEntry, 0, len(f.st.Catalog))
	for _, e := range f.st.Catalog {
		list = append(list, e)
	}
	f.mu.RUnlock()
	sort.Slice(list, func(i, j int) bool {
		if list[i].Schema != list[j].Schema {
			return list[i].Schema < list[j].Schema
		}
		return list[i].Table < list[j].Table
	})
	return list
}

// holder is a proxy that may be serving from memory, as a leader sees it.
type holder struct {
	node    string
	inc     uint64 // the incarnation that renewed last
	addr    string
	expires time.Time // by this node's clock
}

// holders lists the members whose leases may still be valid at now, given
// a lease of d plus margin.
func (f *fsm) holders(now time.Time, d time.Duration) []holder {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []holder
	for id, m := range f.st.Members {
		if exp := m.renewed.Add(d); now.Before(exp) {
			out = append(out, holder{node: id, inc: m.Inc, addr: m.Addr, expires: exp})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].node < out[j].node })
	return out
}

// allWritten reports whether every one of ids has an open intent.
func (f *fsm) allWritten(ids []lease.TableID) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, id := range ids {
		if t := f.st.Tables[id]; t == nil || t.Intents == 0 {
			return false
		}
	}
	return len(ids) > 0
}

func (f *fsm) table(id lease.TableID) tableRec {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if t := f.st.Tables[id]; t != nil {
		return *t
	}
	return tableRec{Version: 1}
}
