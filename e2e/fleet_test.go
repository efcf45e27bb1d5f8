package e2e

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"tableproxy/internal/testdb"
)

// memberRow is a row of tableproxy.cluster_members.
type memberRow struct {
	voter, state string
	removeIn     int64
}

func clusterMembers(t *testing.T, db *sql.DB) (map[string]memberRow, error) {
	t.Helper()
	rows, err := db.Query("SELECT id, voter, state, remove_in_ms FROM tableproxy.cluster_members")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]memberRow{}
	for rows.Next() {
		var id string
		var m memberRow
		if err := rows.Scan(&id, &m.voter, &m.state, &m.removeIn); err != nil {
			return nil, err
		}
		out[id] = m
	}
	return out, rows.Err()
}

// addSidecar starts a non-voter with a fresh data dir, joining through
// join, as a replaced pod would.
func (e *clusterEnv) addSidecar(t *testing.T, id, join string) *clusterNode {
	dir := t.TempDir()
	nd := &clusterNode{id: id, raft: freePort(t), dataDir: filepath.Join(dir, "data"), cfg: filepath.Join(dir, "tableproxy.yaml")}
	e.addNode(t, nd, join, true)
	return nd
}

// Sidecars come and go: one killed with kill -9 is removed by the leader
// once it has been silent for cluster.remove_dead_after, one stopped with
// SIGTERM removes itself before it exits, and a killed voter stays, shown
// unreachable, with no removal due.
func TestClusterSidecarsComeAndGo(t *testing.T) {
	const deadAfter = 4 * time.Second
	e := newClusterEnvWith(t, 3, nil, fmt.Sprintf("  remove_dead_after: %s\n", deadAfter))
	var side []*clusterNode
	for i := 1; i <= 3; i++ {
		side = append(side, e.addSidecar(t, fmt.Sprintf("s%d", i), e.nodes[i%3].raft))
	}
	db := e.conn(t, e.nodes[0], e.app)
	var ms map[string]memberRow
	waitFor(t, 20*time.Second, "six live members", func() (bool, error) {
		var err error
		ms, err = clusterMembers(t, db)
		if err != nil || len(ms) != 6 {
			return false, fmt.Errorf("%v %v", ms, err)
		}
		for _, m := range ms {
			if m.state != "live" {
				return false, fmt.Errorf("%v", ms)
			}
		}
		return ms["s1"].voter == "NO" && ms["n2"].voter == "YES", fmt.Errorf("%v", ms)
	})

	// SIGTERM: gone by the time the process has exited.
	side[1].p.stop(t)
	side[1].p = nil
	if ms, err := clusterMembers(t, db); err != nil || len(ms) != 5 {
		t.Fatalf("after s2 exited on SIGTERM: %v %v", ms, err)
	} else if _, ok := ms["s2"]; ok {
		t.Fatalf("s2 still a member after it exited on SIGTERM: %v", ms)
	}

	// kill -9 of a sidecar and of a voter that does not lead.
	leader := e.leader(t, e.nodes[0])
	if leader == nil {
		t.Fatal("no leader")
	}
	ldb := e.conn(t, leader, e.app)
	voter := e.follower(leader)
	killed := time.Now()
	e.kill9(t, side[0])
	e.kill9(t, voter)
	waitFor(t, 10*time.Second, "s1 unreachable with a removal due, the voter unreachable with none", func() (bool, error) {
		ms, err := clusterMembers(t, ldb)
		if err != nil {
			return false, err
		}
		s1, v := ms["s1"], ms[voter.id]
		return s1.state == "unreachable" && s1.removeIn >= 0 && s1.removeIn <= deadAfter.Milliseconds() &&
			v.state == "unreachable" && v.removeIn == -1, fmt.Errorf("%v", ms)
	})
	waitFor(t, deadAfter+10*time.Second, "s1 removed", func() (bool, error) {
		ms, err := clusterMembers(t, ldb)
		_, in := ms["s1"]
		return err == nil && !in, fmt.Errorf("%v %v", ms, err)
	})
	took := time.Since(killed)
	t.Logf("the killed sidecar was removed %s after kill -9 (remove_dead_after %s)", took, deadAfter)
	if took < deadAfter-time.Second {
		t.Fatalf("s1 removed %s after it died, before remove_dead_after (%s)", took, deadAfter)
	}
	time.Sleep(deadAfter)
	ms, err := clusterMembers(t, ldb)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := ms[voter.id]; !ok || v.state != "unreachable" {
		t.Fatalf("the killed voter %s: %v", voter.id, ms)
	}
	if len(ms) != 4 || ms["s3"].state != "live" {
		t.Fatalf("members: %v", ms)
	}
}

// fleetRounds is how many rounds TestClusterFleetChurn runs
// (TABLEPROXY_FLEET_ROUNDS; 6 in CI, one history each), and
// fleetLeaderEvery how often a round loses the leader instead of a
// sidecar (TABLEPROXY_FLEET_LEADER_EVERY; 0, never, in CI).
// bench/histories.sh runs the long form.
func fleetRounds() int { return envCount("TABLEPROXY_FLEET_ROUNDS", 6) }

func fleetLeaderEvery() int { return envCount("TABLEPROXY_FLEET_LEADER_EVERY", 0) }

func envCount(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n >= 0 {
		return n
	}
	return def
}

// Churn, shortened for CI (bench/fleet.sh is the long form): three voters
// and four sidecars; one sidecar after another is killed (kill -9 and
// SIGTERM in turn) while clients read and write cached rows through random
// proxies, and replaced by a new one with a fresh data dir, id and
// address. Every history is linearizable, the membership never holds more
// dead members than were killed within remove_dead_after, it is back to
// the running proxies once that has passed, and every sidecar then
// answers reads from memory. With TABLEPROXY_FLEET_LEADER_EVERY=k, every
// k-th round kills the leader with kill -9 instead, and restarts it.
func TestClusterFleetChurn(t *testing.T) {
	const deadAfter, sidecars, keys = 4 * time.Second, 4, 4
	e := newClusterEnvWith(t, 3, nil, fmt.Sprintf("  remove_dead_after: %s\n", deadAfter))
	use := "USE `" + e.cacheEnv.db + "`; "
	e.backend.Exec(t, use+"CREATE TABLE kv (id INT PRIMARY KEY, v INT NOT NULL)")
	for k := 1; k <= keys; k++ {
		e.backend.Exec(t, use+fmt.Sprintf("INSERT INTO kv VALUES (%d, 0)", k))
	}
	admin := e.conn(t, e.nodes[0], e.admin)
	if _, err := admin.Exec("ALTER TABLE kv CACHE"); err != nil {
		t.Fatal(err)
	}
	next := 0
	var side []*clusterNode
	addSide := func() {
		next++
		side = append(side, e.addSidecar(t, fmt.Sprintf("s%d", next), e.nodes[next%3].raft))
	}
	for len(side) < sidecars {
		addSide()
	}
	e.waitReadyEverywhere(t, "kv", keys)
	vdb := e.conn(t, e.nodes[0], e.app)

	type death struct {
		at     time.Time
		killed bool // kill -9 (else SIGTERM: removed at once)
	}
	var deaths []death
	// bounded: the membership holds the running proxies, plus at most
	// the sidecars killed outright within remove_dead_after (and a
	// second for the leader's check), never more.
	bounded := func(when string) {
		ms, err := clusterMembers(t, vdb)
		if err != nil {
			t.Fatal(err)
		}
		running := 3 + len(side)
		lingering := 0
		for _, d := range deaths {
			if d.killed && time.Since(d.at) < deadAfter+time.Second {
				lingering++
			}
		}
		t.Logf("%s: %d members, %d proxies running", when, len(ms), running)
		if len(ms) > running+lingering {
			t.Fatalf("%s: %d members for %d running proxies and %d killed within remove_dead_after: %v", when, len(ms), running, lingering, ms)
		}
	}
	rounds, leaderEvery := fleetRounds(), fleetLeaderEvery()
	for r := 0; r < rounds; r++ {
		if leaderEvery > 0 && (r+1)%leaderEvery == 0 {
			l := e.leader(t, side[0])
			if l == nil {
				t.Fatalf("round %d: no leader", r+1)
			}
			var killedAt time.Time
			ops := e.runClients(t, 4, keys, 3*time.Second, func() {
				time.Sleep(time.Second)
				e.kill9(t, l)
				killedAt = time.Now()
			}, nil)
			checkHistory(t, fmt.Sprintf("churn round %d (leader %s, kill -9)", r+1, l.id), ops)
			e.startNode(t, l)
			e.waitReadyEverywhere(t, "kv", keys)
			// The new leader counts a silence from when it took over
			// (by now at the latest): a sidecar killed before that and
			// not yet removed goes remove_dead_after after it.
			for k, d := range deaths {
				if d.killed && d.at.After(killedAt.Add(-deadAfter-time.Second)) {
					deaths[k].at = time.Now()
				}
			}
			if l == e.nodes[0] {
				vdb.Close()
				vdb = e.conn(t, e.nodes[0], e.app)
			}
			continue
		}
		i := r % len(side)
		victim := side[i]
		killed := r%2 == 0
		ops := e.runClients(t, 4, keys, 2*time.Second, func() {
			time.Sleep(time.Second)
			if killed {
				e.kill9(t, victim)
			} else {
				victim.p.stop(t)
				victim.p = nil
			}
			deaths = append(deaths, death{at: time.Now(), killed: killed})
		}, nil)
		checkHistory(t, fmt.Sprintf("churn round %d (%s)", r+1, map[bool]string{true: "kill -9", false: "SIGTERM"}[killed]), ops)
		side = append(side[:i], side[i+1:]...)
		addSide()
		bounded(fmt.Sprintf("after round %d", r+1))
	}
	waitFor(t, deadAfter+5*time.Second, "the membership back to the running proxies, every one live", func() (bool, error) {
		ms, err := clusterMembers(t, vdb)
		if err != nil || len(ms) != 3+len(side) {
			return false, fmt.Errorf("%v %v", ms, err)
		}
		for _, m := range ms {
			if m.state != "live" {
				return false, fmt.Errorf("%v", ms)
			}
		}
		return true, nil
	})
	for _, nd := range side {
		db := e.conn(t, nd, e.app)
		before := e.hits(t, db)
		waitFor(t, 10*time.Second, nd.id+" answering reads from memory", func() (bool, error) {
			var v int
			if err := db.QueryRow("SELECT v FROM kv WHERE id = 1").Scan(&v); err != nil {
				return false, err
			}
			return e.hits(t, db) > before, nil
		})
		db.Close()
	}
}

// A sidecar writes a cached table the moment it accepts connections,
// before it may have caught up with the cluster's log: the write must
// still stop the others serving their copies, so a read through any
// proxy right after it returns the new row. (A proxy that had not yet
// applied the catalog took the table for an uncached one and let the
// write through without an intent; the others served the old row until
// the binary log's bump reached them.)
func TestClusterNewSidecarWritesRevoke(t *testing.T) {
	const rounds = 4
	e := newClusterEnv(t, 3)
	use := "USE `" + e.cacheEnv.db + "`; "
	e.backend.Exec(t, use+"CREATE TABLE kv (id INT PRIMARY KEY, v INT NOT NULL)")
	e.backend.Exec(t, use+"INSERT INTO kv VALUES (1, 0)")
	admin := e.conn(t, e.nodes[0], e.admin)
	if _, err := admin.Exec("ALTER TABLE kv CACHE"); err != nil {
		t.Fatal(err)
	}
	voters := append([]*clusterNode(nil), e.nodes...)
	vdbs := make([]*sql.DB, len(voters))
	for i, nd := range voters {
		vdbs[i] = e.conn(t, nd, e.app)
	}
	for r := 1; r <= rounds; r++ {
		// Every voter answers from memory before the write.
		for i, db := range vdbs {
			before := e.hits(t, db)
			waitFor(t, 20*time.Second, voters[i].id+" answering reads from memory", func() (bool, error) {
				var v int
				if err := db.QueryRow("SELECT v FROM kv WHERE id = 1").Scan(&v); err != nil {
					return false, err
				}
				return e.hits(t, db) > before, nil
			})
		}
		sc, sdb := e.writeThroughNewSidecar(t, fmt.Sprintf("s%d", r), voters[r%3].raft, "UPDATE kv SET v = ? WHERE id = 1", r)
		for i, db := range vdbs {
			var v int
			if err := db.QueryRow("SELECT v FROM kv WHERE id = 1").Scan(&v); err != nil {
				t.Fatal(err)
			}
			if v != r {
				t.Errorf("round %d: %s read v=%d after a write of %d through the new sidecar %s had returned", r, voters[i].id, v, r, sc.id)
			}
		}
		sdb.Close()
	}
}

// writeThroughNewSidecar starts a non-voter with a fresh data dir, joining
// through join, and runs the write through it as soon as it accepts a
// connection, not waiting for anything else.
func (e *clusterEnv) writeThroughNewSidecar(t *testing.T, id, join, query string, args ...any) (*clusterNode, *sql.DB) {
	t.Helper()
	dir := t.TempDir()
	nd := &clusterNode{id: id, raft: freePort(t), dataDir: filepath.Join(dir, "data"), cfg: filepath.Join(dir, "tableproxy.yaml")}
	e.writeConfig(t, nd, join, true)
	nd.p = launchProxy(t, nd.cfg, nd.dataDir, e.via, freePort(t), []account{e.app}, []account{e.admin})
	e.nodes = append(e.nodes, nd)
	db := testdb.Open(t, testdb.DSN(nd.p.addr, e.app.name, e.app.password, e.cacheEnv.db, map[string]string{"timeout": "2s", "readTimeout": "10s", "writeTimeout": "10s"}))
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := db.Exec(query, args...)
		if err == nil {
			return nd, db
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v\n%s", id, err, nd.p.stderr.String())
		}
		time.Sleep(time.Millisecond)
	}
}

// A table cached while a session on another proxy (or on the same one)
// has written it in a transaction not yet committed: that write went to
// the backend without an intent, the table being uncached then. After the
// COMMIT returns, every read must see it. The proxies serve the table from
// memory only once every proxy has learned it is cached, and each one
// first gives such sessions an intent on it, held until they end; so while
// the transaction stays open no proxy answers the table from memory, and
// the first read after the COMMIT is new.
func TestClusterCacheWhileWritten(t *testing.T) {
	e := newClusterEnv(t, 2)
	use := "USE `" + e.cacheEnv.db + "`; "
	e.backend.Exec(t, use+"CREATE TABLE kv (id INT PRIMARY KEY, v INT NOT NULL)")
	e.backend.Exec(t, use+"INSERT INTO kv VALUES (1, 0)")
	admin := e.conn(t, e.nodes[0], e.admin)
	reader := e.conn(t, e.nodes[0], e.app)
	read := func() int {
		t.Helper()
		var v int
		if err := reader.QueryRow("SELECT v FROM kv WHERE id = 1").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for round, writerNode := range []*clusterNode{e.nodes[1], e.nodes[0]} {
		want := round + 1
		writer := e.conn(t, writerNode, e.app)
		tx, err := writer.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec("UPDATE kv SET v = ? WHERE id = 1", want); err != nil {
			t.Fatal(err)
		}
		cached := time.Now()
		if _, err := admin.Exec("ALTER TABLE kv CACHE"); err != nil {
			t.Fatal(err)
		}
		// While the transaction is open, no read is answered from memory.
		before := e.hits(t, reader)
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
			if v := read(); v != round {
				t.Fatalf("round %d: read v=%d before the writer committed %d", round, v, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if h := e.hits(t, reader); h != before {
			t.Errorf("round %d (writer %s): %d reads answered from memory while a transaction that wrote the table before it was cached was open",
				round, writerNode.id, h-before)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if v := read(); v != want {
			t.Errorf("round %d (writer %s): read v=%d right after the COMMIT of %d returned", round, writerNode.id, v, want)
		}
		waitFor(t, 20*time.Second, "reads from memory after the commit", func() (bool, error) {
			h := e.hits(t, reader)
			if v := read(); v != want {
				return false, fmt.Errorf("read v=%d after the commit of %d", v, want)
			}
			return e.hits(t, reader) > h, nil
		})
		t.Logf("round %d (writer %s): served from memory %s after ALTER TABLE ... CACHE (the transaction held it 3 s of that)",
			round, writerNode.id, time.Since(cached).Round(time.Millisecond))
		writer.Close()
		if _, err := admin.Exec("ALTER TABLE kv NOCACHE"); err != nil {
			t.Fatal(err)
		}
	}
	// With no transaction open, a newly cached table is served soon.
	cached := time.Now()
	if _, err := admin.Exec("ALTER TABLE kv CACHE"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "reads from memory", func() (bool, error) {
		h := e.hits(t, reader)
		read()
		return e.hits(t, reader) > h, nil
	})
	t.Logf("with nothing open: served from memory %s after ALTER TABLE ... CACHE", time.Since(cached).Round(time.Millisecond))
}
