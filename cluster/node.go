package cluster

// A node: its settings, opening it (the log store, snapshots, the
// listener, Raft, bootstrap or join) and closing it.

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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
	// Join is any member's RaftListen address; empty, or this node's own
	// RaftListen (the seed of a set of voters that all start with the same
	// flags but their own address, as a StatefulSet's pods do), bootstraps
	// a new cluster of one when there is no state yet.
	Join string
	// NonVoter joins as a non-voting member (sidecars).
	NonVoter bool
	// Timing of elections; defaults suit a LAN.
	HeartbeatTimeout, ElectionTimeout time.Duration
	// DeadAfter is how long the leader, by its own clock, waits after it
	// applied a non-voter's last lease renewal before it removes that
	// member from the configuration (see reaper.go). Zero or negative:
	// never. Voters are removed only by an admin (RemoveNode).
	DeadAfter time.Duration
	Logger    *slog.Logger
	// Leases is the lease protocol this node carries (lease.Raft).
	Leases Leases
	// CatalogChanged, if set, is called after an entry changed the
	// catalog of cached tables, from the goroutine that applies the log.
	CatalogChanged func()
	// TLS, if set, makes every connection between members mutual TLS
	// (tls.go); nil: plain TCP.
	TLS *TLSConfigs
}

// Leases is the lease protocol on top of a node (lease.Raft, which the
// node serves as its lease.Log): it is told what the log applies, answers
// the leader's revocations, and, while the node leads, revokes the other
// proxies' leases for a write and waits out a removed member's.
type Leases interface {
	LogEvents
	// Revoke stops this proxy serving tables until it has applied the log
	// up to index; RevokeIntent, until it has applied intent, whose index
	// the leader does not know yet (it asks while the intent commits).
	Revoke(tables []lease.TableID, index uint64)
	RevokeIntent(tables []lease.TableID, intent string)
	// RevokeOthers is the leader's part in opening an intent (see
	// lease.Raft.RevokeOthers): commit waits for the queued entry.
	RevokeOthers(ctx context.Context, tables []lease.TableID, intent string, w lease.Writer, commit func() (uint64, error)) (uint64, error)
	// AwaitLeaseEnd returns once node's lease, as this node has applied
	// its renewals, has run out.
	AwaitLeaseEnd(ctx context.Context, node string) error
	// SinceRenewal is how long ago this node applied node's last renewal.
	SinceRenewal(node string) (time.Duration, bool)
	// Hold is how long after this node applied a renewal the renewer's
	// lease may still be valid (lease plus margin).
	Hold() time.Duration
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
	// leaderChanges counts the changes of leaderID (a metric).
	leaderChanges atomic.Uint64

	swaps atomic.Pointer[SwapHandler] // what to do with swaps other members announce (swaps.go)
	// joining is set while a join loop runs (at start with Join, or when
	// a removed non-voter joins again).
	joining atomic.Bool
	// reap is the leader's bookkeeping of members that do not renew (see
	// reaper.go), guarded by rmu.
	rmu  sync.Mutex
	reap reapState
	// leaving is set once this node asked the leader to remove it (Leave).
	leaving atomic.Bool
	// renewals are the renewals this node, as leader, holds back to
	// append together (renewals.go).
	renewals renewBatch
	// acks are the appends the followers acknowledged (appended.go).
	acks acks
	// learned is the newest catalog entry this proxy's cache has learned
	// of, once it tracks it (ready.go).
	learned       atomic.Uint64
	tracksLearned atomic.Bool
	// leaderless is since when this node's failed renewals have found it
	// knowing no leader (UnixNano; 0: it knew one at the last look), for
	// Renew.
	leaderless atomic.Int64

	stop    chan struct{}
	stopped sync.Once
	wg      sync.WaitGroup
}

// clientTLS is the client side of the members' TLS, nil for plain TCP.
func clientTLS(c *TLSConfigs) *tls.Config {
	if c == nil {
		return nil
	}
	return c.Client
}

// ErrNoLeader means the cluster has no reachable leader now (an election,
// or this node lost its quorum).
var ErrNoLeader = errors.New("cluster: no leader")

// Open starts a node: recovers its log, listens, and bootstraps or joins.
func Open(cfg Config) (*Node, error) {
	if cfg.Leases == nil {
		return nil, errors.New("cluster: no Leases")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
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
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: time.Minute, TLSClientConfig: clientTLS(cfg.TLS)}},
		dirty:  map[lease.TableID]bool{}, flushC: make(chan struct{}, 1), leaderC: make(chan struct{}),
		binlogC: make(chan struct{}, 1)}
	n.fsm = newFSM(nodeEvents{LogEvents: cfg.Leases, catalogChanged: cfg.CatalogChanged})
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
	hlog := raftLogger(n.log)
	logs, stable, snaps, err := n.openStores(dir, hlog)
	if err != nil {
		return err
	}
	if n.wal != nil {
		logs = newRecentLogs(logs, 1024)
	}
	ln, err := net.Listen("tcp", cfg.RaftListen)
	if err != nil {
		return fmt.Errorf("cluster: raft_listen: %w", err)
	}
	n.advertise = ln.Addr().String()
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS.Server)
	}
	n.mux = newMux(ln)
	n.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  streamLayer{subListener: subListener{m: n.mux, c: n.mux.raftC}, advertise: ln.Addr(), tls: clientTLS(cfg.TLS)},
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
	// Followers learn that an entry committed from the next append, and
	// with nothing new to send the leader sends an empty one to every
	// follower after CommitTimeout (a random 1-2x): that is the leader's
	// idle work, per follower. At 5 ms, three voters and 30 sidecars cost
	// the leader a quarter of a core doing nothing but that; at Raft's
	// default of 50 ms, a tenth of it. The price: with no other traffic, a
	// proxy applies the close of a write's intent (and serves the table
	// from memory again) up to 100 ms after it committed. Writes do not
	// wait for it.
	rc.CommitTimeout = 50 * time.Millisecond
	// Apply returns once the entry is queued, not once the leader's loop
	// has taken it (which waits for the fsync of the batch before): the
	// leader then asks for revocations while the entry commits, and
	// entries that arrive during an fsync go out together in the next one.
	rc.BatchApplyCh = true
	rc.SnapshotThreshold = 4096
	rc.TrailingLogs = 2048
	n.raft, err = raft.NewRaft(rc, n.fsm, revokingStore{LogStore: logs, leases: cfg.Leases}, stable, snaps, ackTransport{NetworkTransport: n.trans, n: n})
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
	if cfg.DeadAfter > 0 {
		n.wg.Add(1)
		go n.whileLeading(min(cfg.DeadAfter/4, time.Second), n.reapDead)
	}
	n.wg.Add(1)
	go n.whileLeading(readyEvery, n.markReady)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		_ = n.http.Serve(subListener{m: n.mux, c: n.mux.httpC})
	}()
	existing, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	switch {
	case cfg.Join != "" && cfg.Join != cfg.RaftListen:
		n.startJoin()
	case !existing:
		f := n.raft.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: rc.LocalID, Address: raft.ServerAddress(n.advertise)}}})
		if err := f.Error(); err != nil {
			return fmt.Errorf("cluster: bootstrap: %w", err)
		}
	}
	n.log.Info("cluster: node started", "raft_listen", n.advertise, "join", cfg.Join, "nonvoter", cfg.NonVoter, "recovered", existing)
	return nil
}

// openStores opens the log, the stable store and the snapshots. A voter
// keeps them in raft-wal and files under dir. A non-voter keeps them in
// memory: it counts in no quorum, so nothing it stores need survive it
// (restarted, it is sent a snapshot like any new member, and a sidecar
// restarts with a new data dir anyway), and its fsyncs would queue on the
// disk in front of the voters', whose fsyncs every write waits for: with
// 30 sidecars, each write's entries cost 30 fsyncs more.
func (n *Node) openStores(dir string, hlog hclog.Logger) (raft.LogStore, raft.StableStore, raft.SnapshotStore, error) {
	if n.cfg.NonVoter {
		mem := raft.NewInmemStore()
		return mem, mem, raft.NewInmemSnapshotStore(), nil
	}
	walDir := filepath.Join(dir, "wal")
	if err := os.MkdirAll(walDir, 0o750); err != nil {
		return nil, nil, nil, fmt.Errorf("cluster: %w", err)
	}
	// raft-wal's Close leaves its metadata database open (and locked):
	// keep a handle to close it, so a node can be reopened in-process.
	n.meta = &metadb.BoltMetaDB{}
	w, err := wal.Open(walDir, wal.WithMetaStore(n.meta), wal.WithSegmentFiler(newTruncFiler(walDir)))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("cluster: log store: %w", err)
	}
	n.wal = w
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hlog)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("cluster: snapshots: %w", err)
	}
	return w, w, snaps, nil
}

// Close leaves the cluster's traffic (not its membership) and stops.
func (n *Node) Close() error {
	n.stopped.Do(func() { close(n.stop) })
	if n.raft != nil {
		n.handOver()
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

// handOver, on a leader with another voter, hands the leadership to the
// most up-to-date one before the node stops, so that writes (intents,
// renewals) go on within a round trip instead of waiting out an election
// timeout. A transfer that fails (no voter reachable) is logged; the
// cluster then elects as it would after a crash.
func (n *Node) handOver() {
	if n.raft.State() != raft.Leader {
		return
	}
	cfg := n.raft.GetConfiguration()
	if cfg.Error() != nil {
		return
	}
	voters := 0
	for _, s := range cfg.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	if voters < 2 {
		return
	}
	start := time.Now()
	if err := n.raft.LeadershipTransfer().Error(); err != nil {
		n.log.Warn("cluster: leadership not handed over before stopping; the others will elect a leader", "err", err)
		return
	}
	n.log.Info("cluster: leadership handed over before stopping", "took", time.Since(start).Round(time.Millisecond))
}

// ID is this node's member id.
func (n *Node) ID() string { return n.cfg.ID }

// Addr is the address Raft and the cluster API listen on.
func (n *Node) Addr() string { return n.advertise }

// Incarnation distinguishes this process from earlier runs of the node.
func (n *Node) Incarnation() uint64 { return n.inc }

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
