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

// CatalogEntry is one cached table in the replicated catalog.
//
// A table cached while the cluster runs is Pending at first: no proxy
// serves it from memory until every member has learned that it is cached
// (see markReady). Until a proxy has applied the entry it takes the table
// for an uncached one and writes it without an intent, unseen by the
// others but for the binary log.
type CatalogEntry struct {
	Schema   string    `json:"schema"`
	Table    string    `json:"table"`
	CachedBy string    `json:"cached_by"`
	Since    time.Time `json:"since"`
	// Index is the log index that cached it (set as it is applied).
	Index   uint64 `json:"index,omitempty"`
	Pending bool   `json:"pending,omitempty"`
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
	Learned uint64 `json:"learned,omitempty"`
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

// LogEvents is what the log tells the lease protocol (lease.Raft), in log
// order, from the goroutine that applies it.
type LogEvents interface {
	TableState(id lease.TableID, v lease.Version, intents int)
	// IntentApplied names an intent whose open or close was applied (after
	// the TableState calls of that entry).
	IntentApplied(name string)
	// Renewed is a member's lease renewal, applied; Forgotten, a removed
	// member; HoldersRestored, the members a snapshot restored, in place
	// of every one before.
	Renewed(h lease.Holder)
	Forgotten(node string)
	HoldersRestored(hs []lease.Holder)
	Applied(index uint64)
}

// events is what the FSM tells: LogEvents, and a change of the catalog.
type events interface {
	LogEvents
	CatalogChanged()
}

// nodeEvents are a node's events: its lease protocol's, and its
// CatalogChanged.
type nodeEvents struct {
	LogEvents
	catalogChanged func()
}

func (e nodeEvents) CatalogChanged() {
	if e.catalogChanged != nil {
		e.catalogChanged()
	}
}

// fsm applies the log. It is not public API: only Node reaches it.
type fsm struct {
	ev events
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

func newFSM(ev events) *fsm { return &fsm{ev: ev, st: newState()} }

// changes is what applying one entry changed, told to events after.
type changes struct {
	tables  map[lease.TableID]tableRec // copies
	intents []string                   // opened or closed
	catalog bool
	renewed *lease.Holder
	forgot  string
	index   uint64 // the entry's, for the operations that record it
}

// Apply panics on an entry it cannot decode: a corrupt log must not be
// skipped silently, since a skipped intent would let a stale copy be served.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	e, err := unmarshalEntry(l.Data)
	if err != nil {
		panic(fmt.Sprintf("cluster: undecodable log entry %d: %v", l.Index, err))
	}
	ch := f.apply(e, l.Index, l.Term)
	if ch.renewed != nil {
		f.ev.Renewed(*ch.renewed)
	}
	if ch.forgot != "" {
		f.ev.Forgotten(ch.forgot)
	}
	for id, t := range ch.tables {
		f.ev.TableState(id, t.Version, t.Intents)
	}
	for _, name := range ch.intents {
		f.ev.IntentApplied(name)
	}
	if f.idle != nil {
		for _, t := range ch.tables {
			if t.Intents == 0 {
				f.idle()
				break
			}
		}
	}
	if ch.catalog {
		f.ev.CatalogChanged()
	}
	if e.word != nil {
		f.mu.RLock()
		f.publishBinlog(f.st)
		f.mu.RUnlock()
	}
	f.ev.Applied(l.Index)
	return nil
}

// apply changes the state for e, the entry at index of term, and returns
// what it changed.
func (f *fsm) apply(e entry, index, term uint64) *changes {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.st
	if w := e.word; w != nil {
		st.Binlog = binlogRec{Node: w.Node, Inc: w.Inc, Term: term, Watching: w.Watching}
		if !st.Binlog.Watching {
			f.publishBinlog(st)
		}
	}
	ch := &changes{tables: map[lease.TableID]tableRec{}, index: index}
	st.bump(e.bumps, ch)
	e.op.apply(st, ch)
	return ch
}

// table returns id's record, making it at version 1.
func (st *state) table(id lease.TableID) *tableRec {
	t := st.Tables[id]
	if t == nil {
		t = &tableRec{Version: 1}
		st.Tables[id] = t
	}
	return t
}

func (st *state) bump(ids []lease.TableID, ch *changes) {
	for _, id := range ids {
		t := st.table(id)
		t.Version++
		ch.tables[id] = *t
	}
}

func (st *state) closeIntent(name string, ch *changes) {
	// Named even when it was never open here: a revocation that waits
	// for an intent whose open failed ends with its close.
	ch.intents = append(ch.intents, name)
	st.remember(name)
	in, ok := st.Intents[name]
	if !ok {
		return
	}
	delete(st.Intents, name)
	for _, id := range in.Tables {
		t := st.table(id)
		t.Version++
		if t.Intents > 0 {
			t.Intents--
		}
		ch.tables[id] = *t
	}
}

// dropIntents closes node's intents from incarnations other than keep:
// their process is gone, and the backend rolled back or finished its
// statements when their connections closed.
func (st *state) dropIntents(node string, keep uint64, ch *changes) {
	var names []string
	for name, in := range st.Intents {
		if in.Node == node && in.Inc != keep {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		st.closeIntent(name, ch)
	}
}

func (o renewal) apply(st *state, ch *changes) {
	m := st.Members[o.Node]
	if m == nil {
		m = &memberRec{}
		st.Members[o.Node] = m
	}
	if m.Inc != o.Inc {
		st.dropIntents(o.Node, o.Inc, ch)
	}
	m.Addr, m.Inc, m.Applied, m.Learned = o.Addr, o.Inc, o.Applied, o.Learned
	ch.renewed = &lease.Holder{Node: o.Node, Inc: o.Inc, Addr: o.Addr}
}

func (o intentOpen) apply(st *state, ch *changes) {
	ch.intents = append(ch.intents, o.Intent)
	if _, dup := st.Intents[o.Intent]; dup || st.closed[o.Intent] {
		return // a retried open, or one that lost the race with its close
	}
	st.Intents[o.Intent] = intentRec{Node: o.Node, Inc: o.Inc, Tables: o.Tables}
	for _, id := range o.Tables {
		t := st.table(id)
		t.Intents++
		ch.tables[id] = *t
	}
}

func (o intentClose) apply(st *state, ch *changes) { st.closeIntent(o.Intent, ch) }

func (o versionBump) apply(st *state, ch *changes) { st.bump(o.Tables, ch) }

func (o tableCached) apply(st *state, ch *changes) {
	id := o.Entry.ID()
	cur, had := st.Catalog[id]
	if o.Ready != 0 {
		// (Its version bump rides on the entry: see markReady.)
		if had && cur.Pending && cur.Index == o.Ready {
			cur.Pending = false
			st.Catalog[id] = cur
			ch.catalog = true
		}
		return
	}
	if !had {
		e := o.Entry
		e.Index = ch.index
		st.Catalog[id] = e
		ch.catalog = true
	}
}

func (o tableUncached) apply(st *state, ch *changes) {
	for _, id := range o.Tables {
		if _, had := st.Catalog[id]; had {
			delete(st.Catalog, id)
			ch.catalog = true
		}
	}
}

func (o memberForgotten) apply(st *state, ch *changes) {
	delete(st.Members, o.Node)
	st.dropIntents(o.Node, 0, ch)
	ch.forgot = o.Node
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
	holders := make([]lease.Holder, 0, len(st.Members))
	for node, m := range st.Members {
		holders = append(holders, lease.Holder{Node: node, Inc: m.Inc, Addr: m.Addr})
	}
	f.mu.Unlock()
	// When each member last renewed is unknown: the lease side assumes
	// now, the longest lease.
	f.ev.HoldersRestored(holders)
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
