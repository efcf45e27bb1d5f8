// Package cluster keeps tableproxy's replicated state in a Raft log
// (hashicorp/raft), and is the only package that imports Raft: the
// catalog of cached tables, each table's version, open write intents, and
// the proxies' lease renewals. Never table data: every proxy loads rows
// from the backend itself.
//
// A node stores its log in raft-wal (segment files, one fsync per append
// batch, no B-tree to rewrite: appends are what this log does all day, and
// raft-wal appended an entry in well under a millisecond on the machines we
// measured) and its snapshots as files, both under <data-dir>/raft. One
// TCP address carries Raft's RPCs and a small HTTP API (see mux.go): join,
// propose (followers send their entries to the leader), revoke (the leader
// tells a proxy to stop serving tables) and remove.
//
// A proxy started without cluster flags bootstraps a cluster of one. With
// --join it asks any member to add it (idempotently) and never bootstraps.
//
// Revocation (Chubby's, instead of waiting out every lease as TiDB does):
// the leader queues a write intent and, while it commits, asks every other
// proxy whose lease may still be valid to stop serving the intent's tables
// until it has applied the intent (the writer stops its own copies); a
// proxy that does not answer is waited out until its lease has expired by
// the leader's clock. Only then does the writer run its statement on the
// backend.
//
// What can go wrong: a leader that lost its quorum cannot commit intents
// (writes wait, then pass through and their tables are bumped when the
// cluster recovers); hashicorp/raft's leader lease is not a read lease, so
// nothing here answers a question from a leader's memory without going
// through the log first.
package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"

	"tableproxy/lease"
)

// Config is one node's settings.
type Config struct {
	// ID names the node in the cluster; by default one is generated and
	// kept in the data directory, so a restarted node is the same member.
	ID string
	// RaftListen is the address for Raft and the cluster API, also
	// advertised to the other members (so not 0.0.0.0). Port 0 picks one:
	// fine for a cluster of one.
	RaftListen string
	// DataDir holds the log and snapshots (in DataDir/raft).
	DataDir string
	// Join is any member's RaftListen address; empty bootstraps a new
	// cluster of one when there is no state yet.
	Join string
	// NonVoter joins as a non-voting member (sidecars).
	NonVoter bool
	// LeaseHold is how long the leader treats a proxy's lease as possibly
	// valid after applying its renewal: the lease plus the drift margin.
	LeaseHold time.Duration
	// Timing of elections; defaults suit a LAN.
	HeartbeatTimeout, ElectionTimeout time.Duration
	Logger                            *slog.Logger
	// Events receives every change the log makes, in log order.
	Events Events
	// Revoke is called when the leader asks this proxy to stop serving
	// tables until it has applied the log up to index.
	Revoke func(tables []lease.TableID, index uint64)
	// RevokeIntent is called when the leader asks this proxy to stop
	// serving tables until it has applied intent (whose index the leader
	// does not know yet: it asks while the intent commits).
	RevokeIntent func(tables []lease.TableID, intent string)
}

// Node is one member of the cluster.
type Node struct {
	cfg       Config
	log       *slog.Logger
	inc       uint64
	raft      *raft.Raft
	fsm       *fsm
	wal       *wal.WAL
	meta      *metadb.BoltMetaDB
	trans     *raft.NetworkTransport
	mux       *muxListener
	http      *http.Server
	client    *http.Client
	advertise string

	// dirty holds the bumps this node deferred as leader (see Bump),
	// guarded by dmu; flushC wakes the flusher.
	dmu      sync.Mutex
	dirty    map[lease.TableID]bool
	flushC   chan struct{}
	deferred atomic.Int64 // bumps deferred, for tests

	// binlogWant is what this node, while it leads, has to say of the
	// backend's binary log (see SetBinlogWatched); binlogC wakes the
	// loop that says it.
	binlogWant atomic.Bool
	binlogC    chan struct{}

	// leaderC is closed (and replaced) whenever this node sees the leader
	// change, so that a proposal forwarded to a leader that stopped
	// answering is abandoned for its successor at once; guarded by lmu.
	lmu     sync.Mutex
	leaderC chan struct{}
	// leaderID is the leader's ID as this node knows it ("" while it
	// knows none), kept by watchLeader for BinlogWatched.
	leaderID atomic.Pointer[string]

	stop    chan struct{}
	stopped sync.Once
	wg      sync.WaitGroup
}

// ErrNoLeader means the cluster has no reachable leader now (an election,
// or this node lost its quorum).
var ErrNoLeader = errors.New("cluster: no leader")

// Open starts a node: recovers its log, listens, and bootstraps or joins.
func Open(cfg Config) (*Node, error) {
	if cfg.Events == nil {
		return nil, errors.New("cluster: no Events")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LeaseHold <= 0 {
		cfg.LeaseHold = 3 * time.Second
	}
	// A follower notices a dead leader between one and two heartbeat
	// timeouts after its last contact (hashicorp/raft checks on a random
	// timer), so the heartbeat timeout sets how soon a failover starts.
	// 500 ms keeps that near a second; the leader lease (below) stays at
	// the heartbeat timeout, since the leader stepping down on a short
	// stall is what made leadership flap on a loaded two-core machine. An
	// election that splits the vote waits one to two election timeouts
	// more.
	if cfg.HeartbeatTimeout <= 0 {
		cfg.HeartbeatTimeout = 500 * time.Millisecond
	}
	if cfg.ElectionTimeout <= 0 {
		cfg.ElectionTimeout = time.Second
	}
	if cfg.RaftListen == "" {
		cfg.RaftListen = "127.0.0.1:0"
	}
	dir := filepath.Join(cfg.DataDir, "raft")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if cfg.ID == "" {
		id, err := stableID(dir)
		if err != nil {
			return nil, err
		}
		cfg.ID = id
	}
	n := &Node{cfg: cfg, log: cfg.Logger.With("node", cfg.ID), inc: randomUint64(), stop: make(chan struct{}),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: time.Minute}},
		dirty:  map[lease.TableID]bool{}, flushC: make(chan struct{}, 1), leaderC: make(chan struct{}),
		binlogC: make(chan struct{}, 1)}
	n.fsm = newFSM(cfg.Events)
	n.fsm.idle = n.kickFlush
	n.leaderID.Store(new(string))
	if err := n.start(dir); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

func (n *Node) start(dir string) error {
	cfg := n.cfg
	if err := os.MkdirAll(filepath.Join(dir, "wal"), 0o750); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	// raft-wal's Close leaves its metadata database open (and locked):
	// keep a handle to close it, so a node can be reopened in-process.
	n.meta = &metadb.BoltMetaDB{}
	walDir := filepath.Join(dir, "wal")
	w, err := wal.Open(walDir, wal.WithMetaStore(n.meta), wal.WithSegmentFiler(newTruncFiler(walDir)))
	if err != nil {
		return fmt.Errorf("cluster: log store: %w", err)
	}
	n.wal = w
	hlog := hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: os.Stderr})
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hlog)
	if err != nil {
		return fmt.Errorf("cluster: snapshots: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.RaftListen)
	if err != nil {
		return fmt.Errorf("cluster: raft_listen: %w", err)
	}
	n.advertise = ln.Addr().String()
	n.mux = newMux(ln)
	n.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  streamLayer{subListener: subListener{m: n.mux, c: n.mux.raftC}, advertise: ln.Addr()},
		MaxPool: 4, Timeout: 2 * time.Second, Logger: hlog,
		// One AppendEntries in flight per follower: hashicorp/raft's
		// pipelined replication can deadlock when a follower rejects an
		// append (a deposed leader, after a pause): its decoder exits,
		// the sender blocks handing off one more request, and the
		// follower gets no more entries, nor does the leader's Shutdown
		// return. Entries still go out in batches (BatchApplyCh).
		MaxRPCsInFlight: 1,
	})
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = hlog
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.HeartbeatTimeout
	// Followers learn that an entry committed from the next append: keep
	// the wait short, since a proxy serves a table again only once it has
	// applied the close of the write's intent.
	rc.CommitTimeout = 5 * time.Millisecond
	// Apply returns once the entry is queued, not once the leader's loop
	// has taken it (which waits for the fsync of the batch before): the
	// leader then asks for revocations while the entry commits, and
	// entries that arrive during an fsync go out together in the next one.
	rc.BatchApplyCh = true
	rc.SnapshotThreshold = 4096
	rc.TrailingLogs = 2048
	n.raft, err = raft.NewRaft(rc, n.fsm, w, w, snaps, n.trans)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	obs := make(chan raft.Observation, 16)
	n.raft.RegisterObserver(raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	}))
	n.wg.Add(1)
	go n.watchLeader(obs)
	n.http = &http.Server{Handler: n.routes(), ReadHeaderTimeout: 5 * time.Second}
	n.wg.Add(1)
	go n.flusher()
	n.wg.Add(1)
	go n.sayBinlog()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		_ = n.http.Serve(subListener{m: n.mux, c: n.mux.httpC})
	}()
	existing, err := raft.HasExistingState(w, w, snaps)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	switch {
	case cfg.Join != "":
		n.wg.Add(1)
		go n.joinLoop()
	case !existing:
		f := n.raft.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: rc.LocalID, Address: raft.ServerAddress(n.advertise)}}})
		if err := f.Error(); err != nil {
			return fmt.Errorf("cluster: bootstrap: %w", err)
		}
	}
	n.log.Info("cluster: node started", "raft_listen", n.advertise, "join", cfg.Join, "nonvoter", cfg.NonVoter, "recovered", existing)
	return nil
}

// Close leaves the cluster's traffic (not its membership) and stops.
func (n *Node) Close() error {
	n.stopped.Do(func() { close(n.stop) })
	if n.raft != nil {
		_ = n.raft.Shutdown().Error()
	}
	if n.http != nil {
		_ = n.http.Close()
	}
	if n.trans != nil {
		_ = n.trans.Close()
	}
	if n.mux != nil {
		n.mux.close()
	}
	n.wg.Wait()
	if n.wal != nil {
		_ = n.wal.Close()
	}
	if n.meta != nil {
		_ = n.meta.Close()
	}
	return nil
}

// ID is this node's member id.
func (n *Node) ID() string { return n.cfg.ID }

// Addr is the address Raft and the cluster API listen on.
func (n *Node) Addr() string { return n.advertise }

// Incarnation distinguishes this process from earlier runs of the node.
func (n *Node) Incarnation() uint64 { return n.inc }

// IsLeader reports whether this node is the leader now, by its own
// (possibly stale) view; use it for duties (the binary-log watcher), never
// to answer a read.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// WaitLeader waits until the cluster has a leader.
func (n *Node) WaitLeader(ctx context.Context) error {
	for {
		if addr, _ := n.raft.LeaderWithID(); addr != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Renew commits a renewal of this proxy's lease (with its applied index,
// for cluster_members) and returns its index. The leader refuses renewals
// from nodes outside the configuration: a removed node no longer receives
// the log, so it must not get a lease.
func (n *Node) Renew(ctx context.Context) (uint64, error) {
	return n.propose(ctx, command{Op: opRenew, Node: n.cfg.ID, Inc: n.inc, Addr: n.advertise,
		Applied: n.raft.AppliedIndex()})
}

// ErrNotMember is the leader's answer to a renewal from a node that is not
// in the configuration.
var ErrNotMember = errors.New("cluster: not a member")

func (n *Node) isMember(id string) bool {
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return false
	}
	for _, s := range cf.Configuration().Servers {
		if s.ID == raft.ServerID(id) {
			return true
		}
	}
	return false
}

// OpenIntent commits intent id on tables and returns its index once every
// other proxy whose lease may be valid has stopped serving them (or its
// lease ran out); this one is not asked (see lease.Log). Retrying with the
// same id is safe.
func (n *Node) OpenIntent(ctx context.Context, id string, tables []lease.TableID) (uint64, error) {
	return n.propose(ctx, command{Op: opOpen, Node: n.cfg.ID, Inc: n.inc, Intent: id, Tables: tables})
}

// CloseIntent commits the end of intent id: its tables' versions go up.
func (n *Node) CloseIntent(ctx context.Context, id string) error {
	_, err := n.propose(ctx, command{Op: opClose, Intent: id})
	return err
}

// Bump makes tables' versions go up in an entry that the leader appends
// after this call, so every proxy loads them again after applying it.
//
// The leader defers a bump of tables that all have a write intent open:
// no proxy serves them until the intent closes, and the deferred bump
// rides on the next entry the leader appends (a renewal, an intent, the
// close itself), or goes alone once their intents are closed. The binary
// log reports every write made through the proxies too, and would
// otherwise cost a Raft commit (an fsync on every voter) per write.
func (n *Node) Bump(ctx context.Context, tables []lease.TableID) error {
	_, err := n.propose(ctx, command{Op: opBump, Tables: tables})
	return err
}

func (n *Node) kickFlush() {
	select {
	case n.flushC <- struct{}{}:
	default:
	}
}

// takeDirty empties the deferred bumps.
func (n *Node) takeDirty() []lease.TableID {
	n.dmu.Lock()
	defer n.dmu.Unlock()
	if len(n.dirty) == 0 {
		return nil
	}
	out := make([]lease.TableID, 0, len(n.dirty))
	for id := range n.dirty {
		out = append(out, id)
	}
	clear(n.dirty)
	return out
}

func (n *Node) markDirty(ids []lease.TableID) {
	n.dmu.Lock()
	for _, id := range ids {
		n.dirty[id] = true
	}
	n.dmu.Unlock()
}

// flusher commits the deferred bumps of tables whose intents have all
// closed (woken by the log's applier), and retries the ones an entry
// could not carry.
func (n *Node) flusher() {
	defer n.wg.Done()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-n.flushC:
		case <-t.C:
		}
		n.dmu.Lock()
		var due []lease.TableID
		for id := range n.dirty {
			if n.fsm.table(id).Intents == 0 {
				due = append(due, id)
			}
		}
		n.dmu.Unlock()
		if len(due) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := n.Bump(ctx, due); err != nil {
			n.log.Warn("cluster: a deferred version bump failed; retrying", "err", err)
			n.markDirty(due)
		}
		cancel()
	}
}

// SetBinlogWatched tells the cluster, while this node leads, whether it
// follows the backend's binary log and has caught up with it. Only the
// leader follows the log, and writes that bypass the proxies reach the
// others only through the versions it bumps: a proxy answers from memory
// only while the current term's leader has said it is watching
// (BinlogWatched), so a stalled or broken stream on the leader, or a new
// leader that has not caught up yet, stops every proxy's memory reads.
func (n *Node) SetBinlogWatched(ok bool) {
	if n.binlogWant.Swap(ok) != ok {
		select {
		case n.binlogC <- struct{}{}:
		default:
		}
	}
}

// BinlogWatched reports whether the leader has said it is watching the
// binary log, in the current term, and still leads as far as this node
// knows. Raft's current term moves before any entry of the new term is
// applied here (a candidate raises it when it starts an election, a
// follower when it hears from the new leader), so a word of an earlier
// term counts for nothing even if that term's leader got it committed
// after it died; and a node that has lost its leader (a heartbeat timeout,
// which is how a non-voter learns it) trusts nobody's word.
func (n *Node) BinlogWatched() bool {
	return binlogTrusted(n.fsm.binlog.Load(), n.raft.CurrentTerm(), *n.leaderID.Load())
}

// binlogTrusted is BinlogWatched's rule, for a word b, the current term
// and the leader's ID as this node knows them.
func binlogTrusted(b *binlogRec, term uint64, leader string) bool {
	return b != nil && b.Watching && b.Term == term && b.Node == leader
}

// binlogSaid reports whether the log already says what this node, as
// leader, wants said.
func (n *Node) binlogSaid(want bool) bool {
	b := n.fsm.binlog.Load()
	trusted := binlogTrusted(b, n.raft.CurrentTerm(), *n.leaderID.Load())
	if !want {
		return !trusted
	}
	return trusted && b.Node == n.cfg.ID && b.Inc == n.inc
}

// sayBinlog commits what this node, as leader, has to say of the binary
// log whenever it is not what the log says: when it changes, and once in
// every term it leads. It appends only as the leader (never forwards), so
// what an entry says is always its own term's leader's word.
func (n *Node) sayBinlog() {
	defer n.wg.Done()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-n.binlogC:
		case <-t.C:
		}
		want := n.binlogWant.Load()
		if n.raft.State() != raft.Leader || n.binlogSaid(want) {
			continue
		}
		c := command{Op: opBump, Node: n.cfg.ID, Inc: n.inc, Watching: &want}
		data, err := json.Marshal(c)
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if _, err := n.applyAsLeader(ctx, c, data); err != nil {
			n.log.Debug("cluster: saying whether the binary log is watched failed; retrying", "watching", want, "err", err)
		}
		cancel()
	}
}

// Catalog lists the cached tables, as this node has applied them.
func (n *Node) Catalog() []CatalogEntry { return n.fsm.catalog() }

// CacheTable commits a table into the catalog.
func (n *Node) CacheTable(ctx context.Context, e CatalogEntry) error {
	_, err := n.propose(ctx, command{Op: opCache, Entry: &e})
	return err
}

// NoCacheTable commits a table's removal from the catalog.
func (n *Node) NoCacheTable(ctx context.Context, id lease.TableID) error {
	_, err := n.propose(ctx, command{Op: opNoCache, Tables: []lease.TableID{id}})
	return err
}

// propose commits c through the leader, retrying while there is none,
// until ctx ends.
func (n *Node) propose(ctx context.Context, c command) (uint64, error) {
	data, err := json.Marshal(c)
	if err != nil {
		return 0, err
	}
	for {
		idx, err := n.proposeOnce(ctx, c, data)
		if err == nil || !retryable(err) {
			return idx, err
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%w (%v)", ctx.Err(), err)
		case <-n.stop:
			return 0, errClosed
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func retryable(err error) bool {
	return errors.Is(err, ErrNoLeader) || errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
		errors.Is(err, raft.ErrLeadershipTransferInProgress) || errors.Is(err, errForward) || errors.Is(err, errLeaderLog)
}

var errForward = errors.New("cluster: forwarding to the leader failed")

// errLeaderLog wraps the error of the leader's own log write. Raft fails
// the batch it could not store, before any follower was sent it, and the
// leader steps down: the proposal is retried through the next leader, as
// one whose leader was deposed (every entry is idempotent).
var errLeaderLog = errors.New("cluster: the leader could not write its log")

// applyError is what a proposal's caller is told of err, the error of the
// future of this node's Apply as leader, under ctx.
func applyError(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return ctx.Err()
	case leaderLogFailed(err):
		return fmt.Errorf("%w: %w", errLeaderLog, err)
	}
	return err
}

// leaderLogFailed reports whether err, from the future of a leader's
// Apply, is its log store's: Raft's own answers there are the errors
// below, and a store's error is passed on as it is.
func leaderLogFailed(err error) bool {
	for _, own := range []error{raft.ErrNotLeader, raft.ErrLeadershipLost, raft.ErrAbortedByRestore, raft.ErrRaftShutdown,
		raft.ErrEnqueueTimeout, raft.ErrLeadershipTransferInProgress} {
		if errors.Is(err, own) {
			return false
		}
	}
	return true
}

func (n *Node) proposeOnce(ctx context.Context, c command, data []byte) (uint64, error) {
	if n.raft.State() == raft.Leader {
		return n.applyAsLeader(ctx, c, data)
	}
	changed := n.leaderChanged()
	addr, _ := n.raft.LeaderWithID()
	if addr == "" {
		return 0, ErrNoLeader
	}
	// A leader that stopped answering (paused, partitioned) holds the
	// request until this node notices and the cluster elects another:
	// give up on it then, and send the proposal to the successor.
	// Retrying is safe: every entry is idempotent, and an intent's open
	// that commits after its close is ignored.
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-changed:
			cancel()
		case <-fctx.Done():
		}
	}()
	var out struct {
		Index uint64 `json:"index"`
	}
	if err := n.post(fctx, string(addr), "/cluster/v1/propose", data, &out); err != nil {
		return 0, err
	}
	return out.Index, nil
}

// noteLeader reads the leader's ID from Raft after a change was observed.
// Observations may be dropped when they come faster than they are read,
// but then one is still waiting, and reading it reads the newest leader.
func (n *Node) noteLeader() {
	_, id := n.raft.LeaderWithID()
	s := string(id)
	n.leaderID.Store(&s)
}

// leaderChanged returns a channel that is closed when the leader changes.
func (n *Node) leaderChanged() <-chan struct{} {
	n.lmu.Lock()
	defer n.lmu.Unlock()
	return n.leaderC
}

// watchLeader keeps leaderID current. It reads the leader once before the
// first observation: Raft runs from NewRaft on, and a restarted node often
// hears from the leader before its observer is registered; that change is
// never observed, and until the next one this node would trust no leader's
// word on the binary log (BinlogWatched) and serve nothing from memory.
func (n *Node) watchLeader(obs chan raft.Observation) {
	defer n.wg.Done()
	for {
		n.noteLeader()
		n.lmu.Lock()
		close(n.leaderC)
		n.leaderC = make(chan struct{})
		n.lmu.Unlock()
		select {
		case <-n.stop:
			return
		case <-obs:
		}
	}
}

// applyAsLeader appends c and, for an intent, revokes it.
func (n *Node) applyAsLeader(ctx context.Context, c command, data []byte) (_ uint64, err error) {
	timeout := 5 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	if c.Op == opRenew && !n.isMember(c.Node) {
		return 0, fmt.Errorf("%w: %q", ErrNotMember, c.Node)
	}
	if c.Op == opBump && n.fsm.allWritten(c.Tables) {
		n.deferred.Add(1)
		n.markDirty(c.Tables)
		return 0, nil
	}
	// Deferred bumps ride on this entry: it is appended after they were
	// asked for, which is all a bump needs.
	if extra := n.takeDirty(); len(extra) > 0 {
		defer func() {
			if err != nil {
				n.markDirty(extra) // the flusher tries again
			}
		}()
		c.Bumps = append(c.Bumps, extra...)
		if data, err = json.Marshal(c); err != nil {
			return 0, err
		}
	}
	f := n.raft.Apply(data, timeout)
	var early map[string]chan error
	if c.Op == opOpen {
		// The entry is queued: any renewal queued from now on commits
		// after it. Ask the proxies that hold leases now to stop serving
		// while it commits, instead of after.
		early = n.revokeEarly(ctx, c.Tables, c.Intent, writer{c.Node, c.Inc})
	}
	if err := f.Error(); err != nil {
		return 0, applyError(ctx, err)
	}
	idx := f.Index()
	if c.Op == opOpen {
		if err := n.revoke(ctx, c.Tables, idx, writer{c.Node, c.Inc}, early); err != nil {
			return 0, err
		}
	}
	return idx, nil
}

// writer is the process that proposed an intent. The leader does not ask
// it to stop serving the intent's tables: it stops its own copies until it
// has applied the open (see lease.Log.OpenIntent), and the answer to its
// proposal is what tells it the index. Only that process is spared: a
// later incarnation of the node, which never saw the proposal, is asked
// like any other proxy.
type writer struct {
	node string
	inc  uint64
}

func (h holder) is(w writer) bool { return h.node == w.node && h.inc == w.inc }

// revokeEarly asks every other proxy whose lease may be valid now, but
// the intent's writer, to stop serving tables until it has applied intent,
// and returns where each answer (nil: it acknowledged) will arrive.
func (n *Node) revokeEarly(ctx context.Context, tables []lease.TableID, intent string, proposer writer) map[string]chan error {
	body, _ := json.Marshal(revokeRequest{Tables: tables, Intent: intent})
	out := map[string]chan error{}
	for _, h := range n.fsm.holders(time.Now(), n.cfg.LeaseHold) {
		if h.node == n.cfg.ID || h.is(proposer) {
			continue
		}
		ch := make(chan error, 1)
		out[h.node] = ch
		go func(h holder) {
			rctx, cancel := context.WithDeadline(ctx, h.expires)
			defer cancel()
			ch <- n.post(rctx, h.addr, "/cluster/v1/revoke", body, nil)
		}(h)
	}
	return out
}

// revoke makes every proxy whose lease may still be valid, now that the
// intent at index is applied here, stop serving tables (the writer, as in
// revokeEarly, stops its own): the ones asked early have answered or are
// waited for; the others (a renewal applied in between) are asked now, by
// index. One that does not answer is waited out until its lease has
// expired by this node's clock. This node applied the intent before Apply
// returned, so its own copies are already stopped.
func (n *Node) revoke(ctx context.Context, tables []lease.TableID, index uint64, proposer writer, early map[string]chan error) error {
	body, _ := json.Marshal(revokeRequest{Tables: tables, Index: index})
	var wg sync.WaitGroup
	for _, h := range n.fsm.holders(time.Now(), n.cfg.LeaseHold) {
		if h.node == n.cfg.ID || h.is(proposer) {
			continue
		}
		wg.Add(1)
		go func(h holder, asked chan error) {
			defer wg.Done()
			var err error
			if asked != nil {
				select {
				case err = <-asked:
				case <-ctx.Done():
					return
				}
			} else {
				rctx, cancel := context.WithDeadline(ctx, h.expires)
				err = n.post(rctx, h.addr, "/cluster/v1/revoke", body, nil)
				cancel()
			}
			if err != nil {
				n.awaitGone(ctx, h, body)
			}
		}(h, early[h.node])
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	return nil
}

// revokeRequest asks a proxy to stop serving tables until it has applied
// the log up to Index or, when Index is 0, the intent named Intent.
// awaitGone returns once h, which did not acknowledge a revocation, no
// longer serves: it acknowledges a retry, or nothing listens at its
// address any more, or its lease has expired by this node's clock. A
// proxy keeps its cluster address open for as long as it may serve from
// memory (lease.Raft stops serving in Close, before Node.Close closes the
// listener, and the listener never closes by itself), so a refused
// connection means its process is gone: a killed leader's successor need
// not wait out its lease. A paused or unreachable proxy still accepts
// connections in its kernel, or times out, and is waited out.
func (n *Node) awaitGone(ctx context.Context, h holder, body []byte) {
	for time.Now().Before(h.expires) {
		c, err := net.DialTimeout("tcp", h.addr, min(time.Until(h.expires), 250*time.Millisecond))
		if errors.Is(err, syscall.ECONNREFUSED) {
			return
		}
		if c != nil {
			c.Close()
			rctx, cancel := context.WithDeadline(ctx, h.expires)
			err = n.post(rctx, h.addr, "/cluster/v1/revoke", body, nil)
			cancel()
			if err == nil {
				return
			}
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return
		case <-n.stop:
			return
		}
	}
}

type revokeRequest struct {
	Tables []lease.TableID `json:"tables"`
	Index  uint64          `json:"index,omitempty"`
	Intent string          `json:"intent,omitempty"`
}

type joinRequest struct {
	ID    string `json:"id"`
	Addr  string `json:"addr"`
	Voter bool   `json:"voter"`
}

// post sends a JSON body to a member's API and decodes the answer into out.
func (n *Node) post(ctx context.Context, addr, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %v", errForward, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusMisdirectedRequest, http.StatusServiceUnavailable:
		return fmt.Errorf("%w: %s: %s", errForward, addr, strings.TrimSpace(string(data)))
	default:
		return fmt.Errorf("cluster: %s%s: %s", addr, path, strings.TrimSpace(string(data)))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func (n *Node) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /cluster/v1/propose", func(w http.ResponseWriter, r *http.Request) {
		data, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		var c command
		if err == nil {
			err = json.Unmarshal(data, &c)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if n.raft.State() != raft.Leader {
			http.Error(w, "not the leader", http.StatusMisdirectedRequest)
			return
		}
		idx, err := n.applyAsLeader(r.Context(), c, data)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, map[string]uint64{"index": idx})
	})
	mux.HandleFunc("POST /cluster/v1/revoke", func(w http.ResponseWriter, r *http.Request) {
		var rr revokeRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&rr); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch {
		case rr.Index == 0 && n.cfg.RevokeIntent != nil:
			n.cfg.RevokeIntent(rr.Tables, rr.Intent)
		case rr.Index > 0 && n.cfg.Revoke != nil:
			n.cfg.Revoke(rr.Tables, rr.Index)
		}
		writeJSON(w, map[string]bool{"ok": true})
	})
	mux.HandleFunc("POST /cluster/v1/join", func(w http.ResponseWriter, r *http.Request) {
		var jr joinRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&jr); err != nil || jr.ID == "" || jr.Addr == "" {
			http.Error(w, "want {id, addr, voter}", http.StatusBadRequest)
			return
		}
		if err := n.addMember(r.Context(), jr); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, map[string]bool{"ok": true})
	})
	mux.HandleFunc("POST /cluster/v1/remove", func(w http.ResponseWriter, r *http.Request) {
		var jr joinRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&jr); err != nil || jr.ID == "" {
			http.Error(w, "want {id}", http.StatusBadRequest)
			return
		}
		if err := n.RemoveNode(r.Context(), jr.ID); err != nil {
			status := http.StatusServiceUnavailable
			if errors.Is(err, ErrUnknownNode) {
				status = http.StatusNotFound
			}
			http.Error(w, err.Error(), status)
			return
		}
		writeJSON(w, map[string]bool{"ok": true})
	})
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// joinLoop asks the member at cfg.Join to add this node until it has.
func (n *Node) joinLoop() {
	defer n.wg.Done()
	body, _ := json.Marshal(joinRequest{ID: n.cfg.ID, Addr: n.advertise, Voter: !n.cfg.NonVoter})
	backoff := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := n.post(ctx, n.cfg.Join, "/cluster/v1/join", body, nil)
		cancel()
		if err == nil {
			n.log.Info("cluster: joined", "via", n.cfg.Join)
			return
		}
		n.log.Warn("cluster: join failed; retrying", "via", n.cfg.Join, "err", err, "retry_in", backoff)
		select {
		case <-n.stop:
			return
		case <-time.After(backoff):
		}
		if backoff < 2*time.Second {
			backoff *= 2
		}
	}
}

// addMember adds (or, with a new address or role, re-adds) a member; on a
// follower it forwards the request to the leader. Adding a member that is
// already there as asked changes nothing.
func (n *Node) addMember(ctx context.Context, jr joinRequest) error {
	if n.raft.State() != raft.Leader {
		addr, _ := n.raft.LeaderWithID()
		if addr == "" {
			return ErrNoLeader
		}
		body, _ := json.Marshal(jr)
		return n.post(ctx, string(addr), "/cluster/v1/join", body, nil)
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return err
	}
	for _, s := range cf.Configuration().Servers {
		if s.ID != raft.ServerID(jr.ID) {
			continue
		}
		if string(s.Address) == jr.Addr && (s.Suffrage == raft.Voter) == jr.Voter {
			return nil
		}
		if s.ID == raft.ServerID(n.cfg.ID) {
			return errors.New("cluster: a node cannot change its own address or role while it leads")
		}
		if err := n.raft.RemoveServer(s.ID, 0, 5*time.Second).Error(); err != nil {
			return err
		}
	}
	var f raft.IndexFuture
	if jr.Voter {
		f = n.raft.AddVoter(raft.ServerID(jr.ID), raft.ServerAddress(jr.Addr), 0, 5*time.Second)
	} else {
		f = n.raft.AddNonvoter(raft.ServerID(jr.ID), raft.ServerAddress(jr.Addr), 0, 5*time.Second)
	}
	if err := f.Error(); err != nil {
		return err
	}
	n.log.Info("cluster: member added", "id", jr.ID, "addr", jr.Addr, "voter", jr.Voter)
	return nil
}

// ErrUnknownNode is RemoveNode's error for an id that is not a member.
var ErrUnknownNode = errors.New("cluster: no such node")

// RemoveNode removes a (dead) member and closes the write intents it left
// open. On a follower it forwards to the leader.
func (n *Node) RemoveNode(ctx context.Context, id string) error {
	if n.raft.State() != raft.Leader {
		addr, _ := n.raft.LeaderWithID()
		if addr == "" {
			return ErrNoLeader
		}
		body, _ := json.Marshal(joinRequest{ID: id})
		err := n.post(ctx, string(addr), "/cluster/v1/remove", body, nil)
		if err != nil && strings.Contains(err.Error(), ErrUnknownNode.Error()) {
			return ErrUnknownNode
		}
		return err
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return err
	}
	found := false
	for _, s := range cf.Configuration().Servers {
		found = found || s.ID == raft.ServerID(id)
	}
	if !found {
		return fmt.Errorf("%w: %q", ErrUnknownNode, id)
	}
	if err := n.raft.RemoveServer(raft.ServerID(id), 0, 5*time.Second).Error(); err != nil {
		return err
	}
	// Closing its intents lets the others serve their tables again. If the
	// node is still running (it was not dead after all) it may be writing
	// under them: wait until it has lost its lease, which it cannot renew
	// any more, and with it the right to write under an intent it holds.
	for _, h := range n.fsm.holders(time.Now(), n.cfg.LeaseHold) {
		if h.node != id {
			continue
		}
		t := time.NewTimer(time.Until(h.expires))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	_, err := n.propose(ctx, command{Op: opForget, Node: id})
	n.log.Info("cluster: member removed", "id", id, "err", err)
	return err
}

// Member is one row of tableproxy.cluster_members.
type Member struct {
	ID, Address  string
	Voter        bool
	Leader       bool
	LastContact  time.Duration // since this node applied the member's last lease renewal; -1 if never
	AppliedIndex uint64        // as the member reported it in that renewal (live for this node)
	Self         bool
}

// Members lists the configuration, as this node knows it.
func (n *Node) Members() ([]Member, error) {
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return nil, err
	}
	_, leader := n.raft.LeaderWithID()
	now := time.Now()
	n.fsm.mu.RLock()
	defer n.fsm.mu.RUnlock()
	var out []Member
	for _, s := range cf.Configuration().Servers {
		m := Member{ID: string(s.ID), Address: string(s.Address), Voter: s.Suffrage == raft.Voter,
			Leader: s.ID == leader, LastContact: -1, Self: s.ID == raft.ServerID(n.cfg.ID)}
		if rec := n.fsm.st.Members[m.ID]; rec != nil {
			if !rec.renewed.IsZero() {
				m.LastContact = now.Sub(rec.renewed)
			}
			m.AppliedIndex = rec.Applied
		}
		if m.Self {
			m.AppliedIndex = n.raft.AppliedIndex()
		}
		out = append(out, m)
	}
	return out, nil
}

// stableID reads the node id kept in dir, or makes and keeps one.
func stableID(dir string) (string, error) {
	path := filepath.Join(dir, "node-id")
	if b, err := os.ReadFile(path); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	id := "node-" + hex.EncodeToString(b[:])
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("cluster: node id: %w", err)
	}
	return id, nil
}

func randomUint64() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) | 1
}
