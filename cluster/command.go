package cluster

// The log's entries: one type per operation, and what rides on an entry
// whatever its operation. Every value in them is set by the proposer (or
// the leader, for what rides on its entries), never by the node applying
// them, so every node computes the same state from the log alone.
//
// The encoding is the one every earlier version wrote (JSON, "op" naming
// the operation): logs and snapshots written before apply the same, and
// members of two versions can share a cluster during an upgrade.

import (
	"encoding/json"
	"errors"
	"fmt"

	"tableproxy/lease"
)

// operation is what one log entry does to the state.
type operation interface {
	// apply changes st, recording what it changed in ch.
	apply(st *state, ch *changes)
	// encode writes the operation's fields into w.
	encode(w *wireEntry)
}

// renewal renews a proxy's lease and says where it answers revocations.
type renewal struct {
	Node    string
	Inc     uint64 // the node's incarnation (one per process start)
	Addr    string // where the node answers revocations
	Applied uint64 // the node's applied index, for cluster_members
	// Learned is the index of the newest catalog entry this proxy has
	// learned of (see Node.SetLearned); 0 from proxies that do not say.
	Learned uint64
}

// intentOpen opens a write intent on some tables.
type intentOpen struct {
	Node   string
	Inc    uint64
	Intent string
	Tables []lease.TableID
}

// intentClose ends a write intent: its tables' versions go up.
type intentClose struct{ Intent string }

// versionBump raises versions for writes that bypassed the proxies.
type versionBump struct{ Tables []lease.TableID }

// tableCached adds a table to the catalog of cached tables, not servable
// yet when Entry.Pending. With Ready, it is instead the leader saying that
// the entry cached at index Ready may be served (see markReady): a node
// of an earlier version applies it as a CACHE of a table it has, which
// changes nothing, and the version bump that rides with it.
type tableCached struct {
	Entry CatalogEntry
	Ready uint64
}

// tableUncached removes tables from the catalog.
type tableUncached struct{ Tables []lease.TableID }

// memberForgotten drops a removed node's lease and its intents.
type memberForgotten struct{ Node string }

// entry is one log entry.
type entry struct {
	op operation
	// bumps raises these tables' versions too: bumps the leader deferred
	// ride on the next entry it writes (see Node.Bump).
	bumps []lease.TableID
	// word is the leader saying whether it follows the backend's binary
	// log and has caught up with it (see Node.SetBinlogWatched). It rides
	// on an empty bump, which a node that does not know it applies as
	// nothing.
	word *binlogWord
}

// binlogWord is what a leader (Node, Inc) says of the binary log.
type binlogWord struct {
	Node     string
	Inc      uint64
	Watching bool
}

// op names an operation in the encoding.
type op string

const (
	opRenew   op = "renew"
	opOpen    op = "open"
	opClose   op = "close"
	opBump    op = "bump"
	opCache   op = "cache"
	opNoCache op = "nocache"
	opForget  op = "forget"
)

// wireEntry is an entry as the log stores it and the API forwards it.
type wireEntry struct {
	Op       op              `json:"op"`
	Node     string          `json:"node,omitempty"`
	Inc      uint64          `json:"inc,omitempty"`
	Addr     string          `json:"addr,omitempty"`
	Intent   string          `json:"intent,omitempty"`
	Applied  uint64          `json:"applied,omitempty"`
	Learned  uint64          `json:"learned,omitempty"`
	Ready    uint64          `json:"ready,omitempty"`
	Tables   []lease.TableID `json:"tables,omitempty"`
	Entry    *CatalogEntry   `json:"entry,omitempty"`
	Bumps    []lease.TableID `json:"bumps,omitempty"`
	Watching *bool           `json:"watching,omitempty"`
}

func (o renewal) encode(w *wireEntry) {
	w.Op, w.Node, w.Inc, w.Addr, w.Applied, w.Learned = opRenew, o.Node, o.Inc, o.Addr, o.Applied, o.Learned
}

func (o intentOpen) encode(w *wireEntry) {
	w.Op, w.Node, w.Inc, w.Intent, w.Tables = opOpen, o.Node, o.Inc, o.Intent, o.Tables
}

func (o intentClose) encode(w *wireEntry) { w.Op, w.Intent = opClose, o.Intent }
func (o versionBump) encode(w *wireEntry) { w.Op, w.Tables = opBump, o.Tables }
func (o tableCached) encode(w *wireEntry) {
	e := o.Entry
	w.Op, w.Entry, w.Ready = opCache, &e, o.Ready
}
func (o tableUncached) encode(w *wireEntry)   { w.Op, w.Tables = opNoCache, o.Tables }
func (o memberForgotten) encode(w *wireEntry) { w.Op, w.Node = opForget, o.Node }

// marshal encodes e.
func (e entry) marshal() ([]byte, error) {
	var w wireEntry
	e.op.encode(&w)
	w.Bumps = e.bumps
	if e.word != nil {
		w.Node, w.Inc = e.word.Node, e.word.Inc
		watching := e.word.Watching
		w.Watching = &watching
	}
	return json.Marshal(&w)
}

// unmarshalEntry decodes an entry; an error means the entry is corrupt.
func unmarshalEntry(data []byte) (entry, error) {
	var w wireEntry
	if err := json.Unmarshal(data, &w); err != nil {
		return entry{}, err
	}
	e := entry{bumps: w.Bumps}
	if w.Watching != nil {
		e.word = &binlogWord{Node: w.Node, Inc: w.Inc, Watching: *w.Watching}
	}
	switch w.Op {
	case opRenew:
		e.op = renewal{Node: w.Node, Inc: w.Inc, Addr: w.Addr, Applied: w.Applied, Learned: w.Learned}
	case opOpen:
		e.op = intentOpen{Node: w.Node, Inc: w.Inc, Intent: w.Intent, Tables: w.Tables}
	case opClose:
		e.op = intentClose{Intent: w.Intent}
	case opBump:
		e.op = versionBump{Tables: w.Tables}
	case opCache:
		if w.Entry == nil {
			return entry{}, errors.New("a cached table without its table")
		}
		e.op = tableCached{Entry: *w.Entry, Ready: w.Ready}
	case opNoCache:
		e.op = tableUncached{Tables: w.Tables}
	case opForget:
		e.op = memberForgotten{Node: w.Node}
	default:
		return entry{}, fmt.Errorf("unknown log operation %q", w.Op)
	}
	return e, nil
}
