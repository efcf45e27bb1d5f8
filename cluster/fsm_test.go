package cluster

import (
	"bytes"
	"io"
	"sync"
	"testing"

	"github.com/hashicorp/raft"

	"tableproxy/lease"
)

// recorder is events that remembers the last state of every table, and
// the members it was told of last.
type recorder struct {
	mu      sync.Mutex
	tables  map[lease.TableID][2]int64
	holders map[string]lease.Holder
	applied uint64
	catalog int
}

func newRecorder() *recorder {
	return &recorder{tables: map[lease.TableID][2]int64{}, holders: map[string]lease.Holder{}}
}

func (r *recorder) TableState(id lease.TableID, v lease.Version, intents int) {
	r.mu.Lock()
	r.tables[id] = [2]int64{int64(v), int64(intents)}
	r.mu.Unlock()
}
func (r *recorder) IntentApplied(string)   {}
func (r *recorder) Renewed(h lease.Holder) { r.mu.Lock(); r.holders[h.Node] = h; r.mu.Unlock() }
func (r *recorder) Forgotten(node string)  { r.mu.Lock(); delete(r.holders, node); r.mu.Unlock() }
func (r *recorder) HoldersRestored(hs []lease.Holder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.holders)
	for _, h := range hs {
		r.holders[h.Node] = h
	}
}
func (r *recorder) Applied(i uint64) { r.mu.Lock(); r.applied = i; r.mu.Unlock() }
func (r *recorder) CatalogChanged()  { r.mu.Lock(); r.catalog++; r.mu.Unlock() }

func (r *recorder) get(id lease.TableID) [2]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tables[id]
}

var tA, tB = lease.TableID{Schema: "s", Table: "a"}, lease.TableID{Schema: "s", Table: "b"}

func applyAll(t *testing.T, f *fsm, cmds ...entry) {
	t.Helper()
	for i, c := range cmds {
		data, err := c.marshal()
		if err != nil {
			t.Fatal(err)
		}
		f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: data})
	}
}

func TestFSMIntentsAndVersions(t *testing.T) {
	r := newRecorder()
	f := newFSM(r)
	applyAll(t, f,
		entry{op: intentOpen{Node: "n1", Inc: 7, Intent: "i1", Tables: []lease.TableID{tA, tB}}},
		entry{op: intentOpen{Node: "n1", Inc: 7, Intent: "i1", Tables: []lease.TableID{tA, tB}}}, // retried: no effect
	)
	if got := r.get(tA); got != [2]int64{1, 1} {
		t.Fatalf("after open: %v, want version 1 with one intent", got)
	}
	applyAll(t, f, entry{op: intentClose{Intent: "i1"}}, entry{op: intentClose{Intent: "i1"}})
	if got := r.get(tA); got != [2]int64{2, 0} {
		t.Fatalf("after close (twice): %v, want version 2, no intent", got)
	}
	applyAll(t, f, entry{op: versionBump{Tables: []lease.TableID{tB}}})
	if got := r.get(tB); got != [2]int64{3, 0} {
		t.Fatalf("after bump: %v", got)
	}
}

// An open that commits after its own close (a retried proposal still on
// its way) opens nothing; bumps deferred by the leader ride on any entry.
func TestFSMLateOpenAndCarriedBumps(t *testing.T) {
	r := newRecorder()
	f := newFSM(r)
	applyAll(t, f,
		entry{op: intentClose{Intent: "i1"}},
		entry{op: intentOpen{Node: "n1", Inc: 7, Intent: "i1", Tables: []lease.TableID{tA}}},
	)
	if got := r.get(tA); got[1] != 0 {
		t.Fatalf("an open after its close left an intent: %v", got)
	}
	applyAll(t, f, entry{op: renewal{Node: "n1", Inc: 7, Addr: "x"}, bumps: []lease.TableID{tA, tB}})
	if a, b := r.get(tA), r.get(tB); a[0] != 2 || b[0] != 2 {
		t.Fatalf("bumps carried by a renewal: %v %v, want version 2", a, b)
	}
}

func TestFSMNewIncarnationClosesOldIntents(t *testing.T) {
	r := newRecorder()
	f := newFSM(r)
	applyAll(t, f,
		entry{op: renewal{Node: "n1", Inc: 1, Addr: "x"}},
		entry{op: intentOpen{Node: "n1", Inc: 1, Intent: "old", Tables: []lease.TableID{tA}}},
		entry{op: intentOpen{Node: "n2", Inc: 5, Intent: "other", Tables: []lease.TableID{tA}}},
	)
	if got := r.get(tA); got[1] != 2 {
		t.Fatalf("intents %v", got)
	}
	// n1 restarted: its old process's intent is gone with it; n2's stays.
	applyAll(t, f, entry{op: renewal{Node: "n1", Inc: 2, Addr: "x"}})
	if got := r.get(tA); got != [2]int64{2, 1} {
		t.Fatalf("after restart of n1: %v, want version 2 and n2's intent", got)
	}
	applyAll(t, f, entry{op: memberForgotten{Node: "n2"}})
	if got := r.get(tA); got != [2]int64{3, 0} {
		t.Fatalf("after n2 removed: %v", got)
	}
}

// restored is a new FSM telling r, restored from a snapshot of f.
func restored(t *testing.T, f *fsm, r events) *fsm {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := snap.Persist(&sink{Buffer: &buf}); err != nil {
		t.Fatal(err)
	}
	f2 := newFSM(r)
	if err := f2.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	return f2
}

func TestFSMSnapshotRestore(t *testing.T) {
	r := newRecorder()
	f := newFSM(r)
	applyAll(t, f,
		entry{op: tableCached{Entry: CatalogEntry{Schema: "s", Table: "a", CachedBy: "root"}}},
		entry{op: versionBump{Tables: []lease.TableID{tA}}},
		entry{op: intentOpen{Node: "n1", Inc: 1, Intent: "i", Tables: []lease.TableID{tA}}},
		entry{op: renewal{Node: "n1", Inc: 1, Addr: "127.0.0.1:1"}},
	)
	r2 := newRecorder()
	f2 := restored(t, f, r2)
	if got := r2.get(tA); got != [2]int64{2, 1} {
		t.Fatalf("restored table %v", got)
	}
	if cat := f2.catalog(); len(cat) != 1 || cat[0].CachedBy != "root" {
		t.Fatalf("restored catalog %+v", cat)
	}
	applyAll(t, f2, entry{op: intentClose{Intent: "i"}})
	if got := r2.get(tA); got != [2]int64{3, 0} {
		t.Fatalf("intent did not survive the snapshot: %v", got)
	}
	if hs := r2.holders; len(hs) != 1 || hs["n1"].Addr != "127.0.0.1:1" {
		t.Fatalf("restored members %+v", hs)
	}
}

func TestFSMPanicsOnCorruptEntry(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("a corrupt entry was skipped")
		}
	}()
	newFSM(newRecorder()).Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: []byte("{nope")})
}

type sink struct{ *bytes.Buffer }

func (s *sink) ID() string    { return "test" }
func (s *sink) Cancel() error { return nil }
func (s *sink) Close() error  { return nil }

// What a leader says of the binary log is kept with the term of its entry
// (a snapshot keeps it too), and holds only while that term is current
// and its speaker leads.
func TestFSMBinlogWordAndItsTerm(t *testing.T) {
	f := newFSM(newRecorder())
	index := uint64(0)
	apply := func(term uint64, c entry) {
		t.Helper()
		data, err := c.marshal()
		if err != nil {
			t.Fatal(err)
		}
		index++
		f.Apply(&raft.Log{Index: index, Term: term, Type: raft.LogCommand, Data: data})
	}
	word := func(f *fsm) binlogRec {
		if b := f.binlog.Load(); b != nil {
			return *b
		}
		return binlogRec{}
	}
	if f.binlog.Load() != nil {
		t.Fatal("a word before anyone said one")
	}
	apply(2, entry{op: renewal{Node: "n1", Inc: 1}})
	apply(2, entry{op: versionBump{}, word: &binlogWord{Node: "n1", Inc: 1, Watching: true}})
	if got := word(f); got != (binlogRec{Node: "n1", Inc: 1, Term: 2, Watching: true}) {
		t.Fatalf("word %+v", got)
	}
	apply(3, entry{op: renewal{Node: "n2", Inc: 1}})
	if got := word(f); got.Term != 2 || !got.Watching {
		t.Fatalf("another entry changed the word: %+v", got)
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// A word of term 2 committed by the next leader is still term 2's.
	apply(2, entry{op: versionBump{}, word: &binlogWord{Node: "n1", Inc: 1, Watching: false}})
	apply(2, entry{op: versionBump{}, word: &binlogWord{Node: "n1", Inc: 1, Watching: true}})
	if got := word(f); got.Term != 2 {
		t.Fatalf("word %+v", got)
	}
	g := newFSM(newRecorder())
	if err := g.Restore(io.NopCloser(bytes.NewReader(snap.(*fsmSnapshot).data))); err != nil {
		t.Fatal(err)
	}
	if got := word(g); got != (binlogRec{Node: "n1", Inc: 1, Term: 2, Watching: true}) {
		t.Fatalf("restored word %+v", got)
	}

	// The rule that reads it.
	w := &binlogRec{Node: "n1", Inc: 1, Term: 2, Watching: true}
	for _, c := range []struct {
		b      *binlogRec
		term   uint64
		leader string
		want   bool
	}{
		{w, 2, "n1", true},
		{nil, 2, "n1", false},
		{&binlogRec{Node: "n1", Inc: 1, Term: 2}, 2, "n1", false}, // it said it stalled
		{w, 3, "n1", false}, // a later term: the same node elected again
		{w, 3, "n2", false}, // a later term, a new leader
		{w, 2, "", false},   // the leader was lost (heartbeat timeout)
		{w, 2, "n2", false}, // a word nobody current said
	} {
		if got := binlogTrusted(c.b, c.term, c.leader); got != c.want {
			t.Errorf("binlogTrusted(%+v, %d, %q) = %v", c.b, c.term, c.leader, got)
		}
	}
}

// A table cached while the cluster runs is pending at the index that
// cached it; only the leader's ready entry for that index (with its bump)
// makes it servable, and a snapshot keeps all of it, and what each member
// said it learned.
func TestFSMPendingCatalogEntry(t *testing.T) {
	r := newRecorder()
	f := newFSM(r)
	applyAll(t, f,
		entry{op: tableCached{Entry: CatalogEntry{Schema: "s", Table: "a", CachedBy: "root", Pending: true}}},
		entry{op: renewal{Node: "n1", Inc: 1, Addr: "127.0.0.1:1", Learned: 1}},
	)
	cat := f.catalog()
	if len(cat) != 1 || !cat[0].Pending || cat[0].Index != 1 {
		t.Fatalf("catalog after CACHE: %+v", cat)
	}
	f2 := restored(t, f, newRecorder())
	if cat := f2.catalog(); len(cat) != 1 || !cat[0].Pending || cat[0].Index != 1 {
		t.Fatalf("restored catalog %+v", cat)
	}
	if m := f2.st.Members["n1"]; m == nil || m.Learned != 1 {
		t.Fatalf("restored member %+v", m)
	}
	e := cat[0]
	stale := entry{op: tableCached{Entry: e, Ready: 7}, bumps: []lease.TableID{tA}}
	ready := entry{op: tableCached{Entry: e, Ready: 1}, bumps: []lease.TableID{tA}}
	for i, c := range []entry{stale, ready} {
		data, err := c.marshal()
		if err != nil {
			t.Fatal(err)
		}
		f.Apply(&raft.Log{Index: uint64(3 + i), Type: raft.LogCommand, Data: data})
		if got := f.catalog()[0].Pending; got != (i == 0) {
			t.Fatalf("after the ready entry for index %d: pending %v", c.op.(tableCached).Ready, got)
		}
	}
	if got := r.get(tA); got[0] != 3 {
		t.Fatalf("version after two entries with a bump: %d", got[0])
	}
}
