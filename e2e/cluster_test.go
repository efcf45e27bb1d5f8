package e2e

import (
	"database/sql"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"tableproxy/internal/testdb"
)

// clusterNode is one proxy of a test cluster, restartable with its data
// directory and killable without failing the test.
type clusterNode struct {
	id, raft, dataDir, cfg string
	p                      *proxyProc
}

type clusterEnv struct {
	*cacheEnv
	nodes   []*clusterNode
	via     string // the proxies' backend address: MariaDB's, or a relay's
	plugins string // more of the nodes' plugins list (YAML items), after the cache
	extra   string // more of the cluster section, in every node's config
}

// newClusterEnv starts n proxies on loopback in front of one MariaDB, the
// first bootstrapping the cluster and the others joining it.
func newClusterEnv(t *testing.T, n int) *clusterEnv {
	return newClusterEnvVia(t, n, nil)
}

// newClusterEnvVia is newClusterEnv with the proxies reaching MariaDB
// through relay(MariaDB's address), if relay is not nil.
func newClusterEnvVia(t *testing.T, n int, relay func(backend string) string) *clusterEnv {
	return newClusterEnvWith(t, n, relay, "")
}

// newClusterEnvWith is newClusterEnvVia with extra (YAML lines, indented
// for the cluster section) in every node's cluster section.
func newClusterEnvWith(t *testing.T, n int, relay func(backend string) string, extra string) *clusterEnv {
	return buildClusterEnv(t, n, relay, "", extra)
}

// buildClusterEnv is newClusterEnvWith with plugins (YAML list items) after
// the cache in every node's plugins.
func buildClusterEnv(t *testing.T, n int, relay func(backend string) string, plugins, extra string) *clusterEnv {
	b := testdb.Get(t)
	ce := &cacheEnv{backend: b, db: b.NewDatabase(t)}
	ce.app = account{b.NewUser(t, "app-pw", "ALL", ce.db), "app-pw"}
	ce.admin = account{b.NewUser(t, "admin-pw", "ALL", ce.db), "admin-pw"}
	for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
		b.Exec(t, fmt.Sprintf("GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '%s'@'%s'", ce.admin.name, host))
	}
	e := &clusterEnv{cacheEnv: ce, via: b.Addr, plugins: plugins, extra: extra}
	if relay != nil {
		e.via = relay(b.Addr)
	}
	for i := 0; i < n; i++ {
		dir := t.TempDir()
		nd := &clusterNode{id: fmt.Sprintf("n%d", i+1), raft: freePort(t), dataDir: filepath.Join(dir, "data"), cfg: filepath.Join(dir, "tableproxy.yaml")}
		join := ""
		if i > 0 {
			join = e.nodes[0].raft
		}
		e.addNode(t, nd, join, false)
	}
	t.Cleanup(func() {
		for _, nd := range e.nodes {
			if nd.p != nil {
				nd.p.stop(t)
			}
		}
	})
	e.proxy = e.nodes[0].p
	return e
}

// addNode writes nd's config (joining through join, as a non-voter if
// asked) and starts it.
func (e *clusterEnv) addNode(t *testing.T, nd *clusterNode, join string, nonvoter bool) {
	t.Helper()
	e.writeConfig(t, nd, join, nonvoter)
	e.nodes = append(e.nodes, nd)
	e.startNode(t, nd)
}

// writeConfig writes nd's config, joining through join, as a non-voter if
// asked.
func (e *clusterEnv) writeConfig(t *testing.T, nd *clusterNode, join string, nonvoter bool) {
	t.Helper()
	yaml := fmt.Sprintf("shutdown_timeout: %s\nplugins:\n  - name: cache\n    options: {max_table_size: 1MB}\n%scluster:\n  node_id: %s\n  raft_listen: %s\n  join: %q\n  nonvoter: %v\n%s",
		shutdownTimeout, e.plugins, nd.id, nd.raft, join, nonvoter, e.extra)
	if err := os.WriteFile(nd.cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (e *clusterEnv) startNode(t *testing.T, nd *clusterNode) {
	t.Helper()
	p := launchProxy(t, nd.cfg, nd.dataDir, e.via, freePort(t), []account{e.app}, []account{e.admin})
	if err := p.waitReady(20 * time.Second); err != nil {
		_ = p.cmd.Process.Kill()
		t.Fatalf("%s did not start: %v\n%s", nd.id, err, p.stderr.String())
	}
	nd.p = p
}

// kill9 kills a node's process without a chance to clean up.
func (e *clusterEnv) kill9(t *testing.T, nd *clusterNode) {
	_ = nd.p.cmd.Process.Kill()
	<-nd.p.done
	if t.Failed() {
		t.Logf("%s stderr:\n%s", nd.id, nd.p.stderr.String())
	}
	nd.p = nil
}

func (e *clusterEnv) conn(t *testing.T, nd *clusterNode, a account) *sql.DB {
	db := testdb.Open(t, testdb.DSN(nd.p.addr, a.name, a.password, e.cacheEnv.db, map[string]string{"timeout": "2s", "readTimeout": "10s", "writeTimeout": "10s"}))
	db.SetMaxIdleConns(8)
	return db
}

// leader returns the node that tableproxy.cluster_members on nd names as
// leader.
func (e *clusterEnv) leader(t *testing.T, nd *clusterNode) *clusterNode {
	db := e.conn(t, nd, e.app)
	defer db.Close()
	var id string
	if err := db.QueryRow("SELECT id FROM tableproxy.cluster_members WHERE leader = 'YES'").Scan(&id); err != nil {
		return nil
	}
	for _, n := range e.nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

func (e *clusterEnv) waitReadyEverywhere(t *testing.T, table string, rows int64) {
	for _, nd := range e.nodes {
		if nd.p == nil {
			continue
		}
		db := e.conn(t, nd, e.app)
		func() {
			defer func() {
				if t.Failed() {
					t.Logf("(that was %s)", nd.id)
				}
			}()
			waitState(t, db, table, "ready", rows, 0)
		}()
		db.Close()
	}
}

func TestClusterMembershipAndAdmin(t *testing.T) {
	e := newClusterEnv(t, 3)
	admin := e.conn(t, e.nodes[0], e.admin)
	waitFor(t, 20*time.Second, "three members", func() (bool, error) {
		var n int
		err := admin.QueryRow("SELECT COUNT(*) FROM tableproxy.cluster_members").Scan(&n)
		if err != nil {
			// COUNT(*) is not answered by the virtual schema: count rows.
			rows, err := admin.Query("SELECT id FROM tableproxy.cluster_members")
			if err != nil {
				return false, err
			}
			for rows.Next() {
				n++
			}
			rows.Close()
		}
		return n == 3, fmt.Errorf("%d members", n)
	})
	app := e.conn(t, e.nodes[1], e.app)
	if _, err := app.Exec("ADMIN CLUSTER REMOVE NODE 'n3'"); mysqlErrNumber(err) != 1227 {
		t.Fatalf("a non-admin removed a node: %v", err)
	}
	e.kill9(t, e.nodes[2])
	if _, err := e.conn(t, e.nodes[1], e.admin).Exec("ADMIN CLUSTER REMOVE NODE 'n3'"); err != nil {
		t.Fatalf("removing a dead node: %v", err)
	}
	waitFor(t, 10*time.Second, "n3 gone", func() (bool, error) {
		var id string
		err := admin.QueryRow("SELECT id FROM tableproxy.cluster_members WHERE id = 'n3'").Scan(&id)
		return err == sql.ErrNoRows, err
	})
}

// A sidecar joins three voters as a non-voter: the membership table says
// so, it answers cached reads from memory, and it never serves a row that a
// write through another proxy (or through itself) has replaced.
func TestClusterNonVoterSidecar(t *testing.T) {
	e := newClusterEnv(t, 3)
	use := "USE `" + e.cacheEnv.db + "`; "
	e.backend.Exec(t, use+"CREATE TABLE kv (id INT PRIMARY KEY, v INT NOT NULL)", use+"INSERT INTO kv VALUES (1, 0)")
	admin := e.conn(t, e.nodes[0], e.admin)
	if _, err := admin.Exec("ALTER TABLE kv CACHE"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	side := &clusterNode{id: "sidecar", raft: freePort(t), dataDir: filepath.Join(dir, "data"), cfg: filepath.Join(dir, "tableproxy.yaml")}
	e.addNode(t, side, e.nodes[1].raft, true) // joining through a follower
	e.waitReadyEverywhere(t, "kv", 1)

	members := map[string]string{}
	waitFor(t, 20*time.Second, "four members, the sidecar without a vote", func() (bool, error) {
		rows, err := admin.Query("SELECT id, voter FROM tableproxy.cluster_members")
		if err != nil {
			return false, err
		}
		defer rows.Close()
		clear(members)
		for rows.Next() {
			var id, voter string
			if err := rows.Scan(&id, &voter); err != nil {
				return false, err
			}
			members[id] = voter
		}
		return len(members) == 4 && members["sidecar"] == "NO" && members["n1"] == "YES", fmt.Errorf("members %v", members)
	})

	sdb := e.conn(t, side, e.app)
	sdb.SetMaxOpenConns(1)
	read := func() int {
		var v int
		if err := sdb.QueryRow("SELECT v FROM kv WHERE id = 1").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := e.hits(t, sdb)
	waitFor(t, 10*time.Second, "reads from memory on the sidecar", func() (bool, error) {
		read()
		return e.hits(t, sdb) > before, nil
	})
	vdb := e.conn(t, e.nodes[2], e.app)
	for i := 1; i <= 20; i++ {
		db := vdb
		if i%2 == 0 {
			db = sdb // the sidecar's own writes open intents like anyone's
		}
		if _, err := db.Exec("UPDATE kv SET v = ? WHERE id = 1", i); err != nil {
			t.Fatal(err)
		}
		if v := read(); v != i {
			t.Fatalf("after write %d completed, the sidecar read %d", i, v)
		}
	}
	before = e.hits(t, sdb)
	waitFor(t, 10*time.Second, "memory reads on the sidecar after the writes", func() (bool, error) {
		if v := read(); v != 20 {
			return false, fmt.Errorf("read %d", v)
		}
		return e.hits(t, sdb) > before, nil
	})
}

// A proxy paused (SIGSTOP) for longer than a lease holds writes up only
// until its lease has expired (lease + margin, 2.25 s), the other proxies
// keep answering from memory, and once resumed the paused proxy serves
// nothing stale. Run for a paused follower and a paused leader.
func TestClusterPausedProxy(t *testing.T) {
	for _, which := range []string{"follower", "leader"} {
		t.Run(which, func(t *testing.T) {
			e := newClusterEnv(t, 3)
			use := "USE `" + e.cacheEnv.db + "`; "
			e.backend.Exec(t, use+"CREATE TABLE kv (id INT PRIMARY KEY, v INT NOT NULL)", use+"INSERT INTO kv VALUES (1, 0)")
			if _, err := e.conn(t, e.nodes[0], e.admin).Exec("ALTER TABLE kv CACHE"); err != nil {
				t.Fatal(err)
			}
			e.waitReadyEverywhere(t, "kv", 1)
			l := e.leader(t, e.nodes[0])
			if l == nil {
				t.Fatal("no leader")
			}
			var followers []*clusterNode
			for _, nd := range e.nodes {
				if nd != l {
					followers = append(followers, nd)
				}
			}
			// A paused follower: writes through the other follower, reads
			// through the leader. A paused leader: writes and reads through
			// the followers, one of which becomes the leader.
			paused, writer, reader := followers[0], followers[1], l
			if which == "leader" {
				paused, writer, reader = l, followers[0], followers[1]
			}
			pdb, wdb, rdb := e.conn(t, paused, e.app), e.conn(t, writer, e.app), e.conn(t, reader, e.app)
			pdb.SetMaxOpenConns(1)
			var v int
			if err := pdb.QueryRow("SELECT v FROM kv WHERE id = 1").Scan(&v); err != nil {
				t.Fatal(err)
			}
			const hold = 2250 * time.Millisecond // lease + margin
			if err := paused.p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			stopped := time.Now()
			resumed := false
			resume := func() {
				if !resumed {
					resumed = true
					_ = paused.p.cmd.Process.Signal(syscall.SIGCONT)
				}
			}
			defer resume()
			var slowest, first time.Duration
			i := 0
			for time.Since(stopped) < hold+time.Second {
				i++
				start := time.Now()
				if _, err := wdb.Exec("UPDATE kv SET v = ? WHERE id = 1", i); err != nil {
					t.Fatalf("write %d with %s paused: %v", i, paused.id, err)
				}
				took := time.Since(start)
				if i == 1 {
					first = took
				}
				slowest = max(slowest, took)
				if err := rdb.QueryRow("SELECT v FROM kv WHERE id = 1").Scan(&v); err != nil || v != i {
					t.Fatalf("after write %d, %s read %d (%v)", i, reader.id, v, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			// Writes are done: the others go back to memory while the
			// paused proxy is still stopped.
			before := e.hits(t, rdb)
			waitFor(t, 5*time.Second, "memory reads on "+reader.id+" with "+paused.id+" paused", func() (bool, error) {
				if err := rdb.QueryRow("SELECT v FROM kv WHERE id = 1").Scan(&v); err != nil || v != i {
					return false, fmt.Errorf("read %d (%v)", v, err)
				}
				return e.hits(t, rdb) > before, nil
			})
			pausedFor := time.Since(stopped)
			resume()
			if err := pdb.QueryRow("SELECT v FROM kv WHERE id = 1").Scan(&v); err != nil || v != i {
				t.Fatalf("%s, resumed after %s, read %d (%v), want %d", paused.id, pausedFor.Round(time.Millisecond), v, err, i)
			}
			t.Logf("%s %s paused %s: %d writes through %s, first took %s, slowest %s (lease + margin %s); %s answered from memory meanwhile",
				which, paused.id, pausedFor.Round(time.Millisecond), i, writer.id, first.Round(time.Millisecond), slowest.Round(time.Millisecond), hold, reader.id)
			if slowest > hold+time.Second {
				t.Errorf("a write took %s with a proxy paused, want at most lease + margin (%s)", slowest, hold)
			}
		})
	}
}

// kvInput is one operation on one row: a write of value, or a read.
type kvInput struct {
	key   int
	write bool
	value int
}

// registers is porcupine's model of rows read and written by primary key.
var registers = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[int][]porcupine.Operation{}
		for _, op := range h {
			k := op.Input.(kvInput).key
			by[k] = append(by[k], op)
		}
		var out [][]porcupine.Operation
		for _, ops := range by {
			out = append(out, ops)
		}
		return out
	},
	Init: func() any { return 0 },
	Step: func(state, input, output any) (bool, any) {
		in := input.(kvInput)
		if in.write {
			return true, in.value
		}
		return output.(int) == state.(int), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(kvInput)
		if in.write {
			return fmt.Sprintf("write k%d=%d", in.key, in.value)
		}
		return fmt.Sprintf("read k%d -> %v", in.key, output)
	},
}

// history records operations of concurrent clients.
type history struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
	next  int
	hits  int
}

func (h *history) now() int64 { return int64(time.Since(h.start)) }

// runClients runs clients against random live proxies for d and returns
// the history. A write that failed may or may not have happened: it is
// recorded as still in flight when the history ends. A failed read is
// dropped.
func (e *clusterEnv) runClients(t *testing.T, clients, keys int, d time.Duration, during func(), skip *clusterNode) []porcupine.Operation {
	h := &history{start: time.Now()}
	// The rows' values when the history starts, as writes that completed
	// before it.
	rows, err := e.backend.Root(t).Query("SELECT id, v FROM `" + e.cacheEnv.db + "`.kv")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k, v int
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		h.ops = append(h.ops, porcupine.Operation{ClientId: clients, Input: kvInput{key: k, write: true, value: v}, Call: -2, Return: -1, Output: 0})
		h.next = max(h.next, v)
	}
	rows.Close()
	dbs := map[*clusterNode]*sql.DB{}
	for _, nd := range e.nodes {
		if nd.p != nil && nd != skip {
			dbs[nd] = e.conn(t, nd, e.app)
		}
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var pending []porcupine.Operation
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(c) + time.Now().UnixNano()))
			for {
				select {
				case <-stop:
					return
				default:
				}
				nd := e.nodes[rng.Intn(len(e.nodes))]
				db := dbs[nd]
				if db == nil {
					continue
				}
				in := kvInput{key: 1 + rng.Intn(keys), write: rng.Intn(50) == 0}
				call := h.now()
				if in.write {
					h.mu.Lock()
					h.next++
					in.value = h.next
					h.mu.Unlock()
					_, err := db.Exec("UPDATE kv SET v = ? WHERE id = ?", in.value, in.key)
					h.mu.Lock()
					op := porcupine.Operation{ClientId: c, Input: in, Call: call, Return: h.now(), Output: 0}
					if err != nil {
						pending = append(pending, op)
					} else {
						h.ops = append(h.ops, op)
					}
					h.mu.Unlock()
					if err != nil {
						time.Sleep(20 * time.Millisecond)
					}
					continue
				}
				var v int
				err := db.QueryRow("SELECT v FROM kv WHERE id = " + strconv.Itoa(in.key)).Scan(&v)
				ret := h.now()
				if err != nil {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				h.mu.Lock()
				h.ops = append(h.ops, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: v, Return: ret})
				h.mu.Unlock()
			}
		}(c)
	}
	if during != nil {
		during()
	}
	time.Sleep(d)
	close(stop)
	wg.Wait()
	for _, db := range dbs {
		db.Close()
	}
	end := h.now() + 1
	var slowest int64
	for _, op := range h.ops {
		if op.Input.(kvInput).write && op.Call >= 0 {
			slowest = max(slowest, op.Return-op.Call)
		}
	}
	t.Logf("slowest completed write: %s; %d writes failed", time.Duration(slowest).Round(time.Millisecond), len(pending))
	for _, op := range pending {
		op.Return = end
		h.ops = append(h.ops, op)
	}
	return h.ops
}

func checkHistory(t *testing.T, name string, ops []porcupine.Operation) {
	t.Helper()
	res := porcupine.CheckOperationsTimeout(registers, ops, 30*time.Second)
	switch res {
	case porcupine.Ok:
		t.Logf("%s: %d operations, linearizable", name, len(ops))
	case porcupine.Illegal:
		t.Errorf("%s: %d operations: NOT linearizable (a stale read)", name, len(ops))
	default:
		t.Logf("%s: %d operations, check timed out", name, len(ops))
	}
}

// memoryHits sums the reads of kv answered from memory by live proxies.
func (e *clusterEnv) memoryHits(t *testing.T) int64 {
	var total int64
	for _, nd := range e.nodes {
		if nd.p == nil {
			continue
		}
		db := e.conn(t, nd, e.app)
		var hits int64
		_ = db.QueryRow("SELECT hits FROM tableproxy.cached_tables WHERE table_name = 'kv'").Scan(&hits)
		db.Close()
		total += hits
	}
	return total
}

func clusterRounds() int {
	if n, err := strconv.Atoi(os.Getenv("TABLEPROXY_CLUSTER_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 1
}

// TestClusterLinearizableUnderFaults: clients read and write cached rows
// through random proxies while proxies are paused, killed and restarted;
// every history must be linearizable (no read returns a row a completed
// write replaced). TABLEPROXY_CLUSTER_ROUNDS repeats the fault cycle.
func TestClusterLinearizableUnderFaults(t *testing.T) {
	e := newClusterEnv(t, 3)
	const keys = 4
	use := "USE `" + e.cacheEnv.db + "`; "
	e.backend.Exec(t, use+"CREATE TABLE kv (id INT PRIMARY KEY, v INT NOT NULL)")
	for k := 1; k <= keys; k++ {
		e.backend.Exec(t, use+fmt.Sprintf("INSERT INTO kv VALUES (%d, 0)", k))
	}
	admin := e.conn(t, e.nodes[0], e.admin)
	if _, err := admin.Exec("ALTER TABLE kv CACHE"); err != nil {
		t.Fatal(err)
	}
	admin.Close()
	e.waitReadyEverywhere(t, "kv", keys)
	lease := 2 * time.Second
	histories := 0
	check := func(name string, ops []porcupine.Operation) {
		checkHistory(t, name, ops)
		histories++
	}
	for round := 1; round <= clusterRounds(); round++ {
		check(fmt.Sprintf("round %d healthy", round), e.runClients(t, 6, keys, 2*time.Second, nil, nil))

		// A follower paused for longer than a lease: writes go on without it.
		var paused *clusterNode
		for _, nd := range e.nodes {
			if l := e.leader(t, e.nodes[0]); nd.p != nil && nd != l {
				paused = nd
			}
		}
		check(fmt.Sprintf("round %d SIGSTOP", round), e.runClients(t, 6, keys, lease+time.Second, func() {
			_ = paused.p.cmd.Process.Signal(syscall.SIGSTOP)
		}, paused))
		_ = paused.p.cmd.Process.Signal(syscall.SIGCONT)
		check(fmt.Sprintf("round %d after SIGCONT", round), e.runClients(t, 6, keys, 2*time.Second, nil, nil))

		// kill -9 the leader, then restart it with its data directory.
		l := e.leader(t, e.nodes[0])
		if l == nil {
			l = e.nodes[0]
		}
		killedAt := time.Now()
		check(fmt.Sprintf("round %d leader killed", round), e.runClients(t, 6, keys, 3*time.Second, func() { e.kill9(t, l) }, nil))
		t.Logf("round %d: leader %s killed %s ago", round, l.id, time.Since(killedAt).Round(time.Millisecond))
		e.startNode(t, l)
		e.waitReadyEverywhere(t, "kv", keys)

		// kill -9 a follower, and bring it back.
		var f *clusterNode
		if nl := e.leader(t, e.nodes[0]); nl != nil {
			for _, nd := range e.nodes {
				if nd != nl {
					f = nd
				}
			}
		} else {
			f = e.nodes[2]
		}
		check(fmt.Sprintf("round %d follower killed", round), e.runClients(t, 6, keys, 2*time.Second, func() { e.kill9(t, f) }, nil))
		e.startNode(t, f)
		e.waitReadyEverywhere(t, "kv", keys)
	}
	hits := e.memoryHits(t)
	t.Logf("%d histories checked; %d reads answered from memory by the live proxies", histories, hits)
	if hits == 0 {
		t.Error("no read was answered from memory: the check proved nothing about the cache")
	}
}

// hits reads kv's count of reads answered from memory on nd.
// cacheKV creates table kv (id 1, v 0), caches it, waits until every
// proxy has loaded it, and returns the leader.
func (e *clusterEnv) cacheKV(t *testing.T) *clusterNode {
	t.Helper()
	use := "USE `" + e.cacheEnv.db + "`; "
	e.backend.Exec(t, use+"CREATE TABLE kv (id INT PRIMARY KEY, v INT NOT NULL)", use+"INSERT INTO kv VALUES (1, 0)")
	admin := e.conn(t, e.nodes[0], e.admin)
	defer admin.Close()
	if _, err := admin.Exec("ALTER TABLE kv CACHE"); err != nil {
		t.Fatal(err)
	}
	e.waitReadyEverywhere(t, "kv", 1)
	l := e.leader(t, e.nodes[0])
	if l == nil {
		t.Fatal("no leader named in tableproxy.cluster_members")
	}
	return l
}

// follower returns a node other than l.
func (e *clusterEnv) follower(l *clusterNode) *clusterNode {
	for _, nd := range e.nodes {
		if nd != l {
			return nd
		}
	}
	return nil
}

func (e *clusterEnv) hits(t *testing.T, db *sql.DB) int64 {
	var hits int64
	_ = db.QueryRow("SELECT hits FROM tableproxy.cached_tables WHERE table_name = 'kv'").Scan(&hits)
	return hits
}

// After the leader is killed, a write through a survivor completes once a
// new leader is elected, and the survivor answers from memory again once
// the new leader follows the binary log: the test reports how long each
// took.
func TestClusterFailoverResumesMemoryReads(t *testing.T) {
	e := newClusterEnv(t, 3)
	l := e.cacheKV(t)
	db := e.conn(t, e.follower(l), e.app)
	servedFromMemory := func() bool {
		before := e.hits(t, db)
		var v int
		if err := db.QueryRow("SELECT v FROM kv WHERE id = 1").Scan(&v); err != nil {
			return false
		}
		return e.hits(t, db) > before
	}
	waitFor(t, 30*time.Second, "reads from memory on a follower", func() (bool, error) { return servedFromMemory(), nil })
	killed := time.Now()
	e.kill9(t, l)
	if _, err := db.Exec("UPDATE kv SET v = 1 WHERE id = 1"); err != nil {
		t.Fatalf("write after the leader died: %v", err)
	}
	wrote := time.Since(killed)
	waitFor(t, 10*time.Second, "reads from memory after failover", func() (bool, error) { return servedFromMemory(), nil })
	back := time.Since(killed)
	t.Logf("leader killed: a write through a survivor completed after %s; reads answered from memory again after %s",
		wrote.Round(time.Millisecond), back.Round(time.Millisecond))
	// Two election timeouts (1 s each) is the aim, typically about 1.2 s
	// here; the bound leaves room for a split vote on a loaded machine.
	if back > 5*time.Second {
		t.Errorf("memory reads resumed %s after the leader died", back)
	}
	var v int
	if err := db.QueryRow("SELECT v FROM kv WHERE id = 1").Scan(&v); err != nil || v != 1 {
		t.Fatalf("read after the write: %d %v", v, err)
	}
}

// writeLatencies runs n single-row UPDATEs of table through db and returns
// their durations, sorted.
func writeLatencies(t *testing.T, db *sql.DB, table string, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		start := time.Now()
		if _, err := db.Exec("UPDATE "+table+" SET v = ? WHERE id = 1", i); err != nil {
			t.Fatal(err)
		}
		out[i] = time.Since(start)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// With three healthy proxies, a write to a cached table through a follower
// costs an intent, a round of revocations and a close on top of the same
// write to an uncached table.
func TestClusterWriteOverhead(t *testing.T) {
	e := newClusterEnv(t, 3)
	use := "USE `" + e.cacheEnv.db + "`; "
	e.backend.Exec(t, use+"CREATE TABLE kv (id INT PRIMARY KEY, v INT NOT NULL)", use+"INSERT INTO kv VALUES (1, 0)",
		use+"CREATE TABLE plain (id INT PRIMARY KEY, v INT NOT NULL)", use+"INSERT INTO plain VALUES (1, 0)")
	admin := e.conn(t, e.nodes[0], e.admin)
	if _, err := admin.Exec("ALTER TABLE kv CACHE"); err != nil {
		t.Fatal(err)
	}
	e.waitReadyEverywhere(t, "kv", 1)
	l := e.leader(t, e.nodes[0])
	via := e.nodes[1]
	if via == l {
		via = e.nodes[2]
	}
	db := e.conn(t, via, e.app)
	db.SetMaxOpenConns(1)
	writeLatencies(t, db, "plain", 20) // warm up
	const n = 300
	plain := writeLatencies(t, db, "plain", n)
	cached := writeLatencies(t, db, "kv", n)
	p := func(d []time.Duration, q float64) time.Duration { return d[int(q*float64(len(d)-1))] }
	t.Logf("UPDATE through a follower of a 3-proxy cluster, %d each: uncached p50 %s p99 %s; cached p50 %s p99 %s; p99 overhead %s",
		n, p(plain, .5), p(plain, .99), p(cached, .5), p(cached, .99), p(cached, .99)-p(plain, .99))
	// Not a speed target (bench/cluster.sh measures that): a write that
	// waited out the other proxies' leases would cost a lease, 2 s; the
	// bound sits well below that and well above what a loaded machine
	// adds to a Raft commit.
	if over := p(cached, .99) - p(plain, .99); over > time.Second {
		t.Errorf("a cached write costs %s more at p99: revocation is waiting out leases", over)
	}
}
