package e2e

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The runbooks of docs/operations.md, as an operator runs them, each with
// clients writing and reading a cached table through the members that stay
// up, and every read checked against the last write acknowledged.

// kvClient writes and reads kv through db until stop is closed: each read
// must see at least the last value it wrote (no stale row), every
// statement must succeed (a member going away is not the client's
// member).
func kvClient(t *testing.T, db *sql.DB, stop <-chan struct{}, ops *atomic.Int64, wg *sync.WaitGroup) {
	defer wg.Done()
	for i := 1; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		if _, err := db.Exec("UPDATE kv SET v = ? WHERE id = 1", i); err != nil {
			t.Errorf("write %d: %v", i, err)
			return
		}
		var v int
		if err := db.QueryRow("SELECT v FROM kv WHERE id = 1").Scan(&v); err != nil {
			t.Errorf("read after write %d: %v", i, err)
			return
		}
		if v != i {
			t.Errorf("read %d after writing %d", v, i)
			return
		}
		ops.Add(1)
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRunbookReplaceAVoter: a voter's host is lost (kill -9); the runbook
// removes it (ADMIN CLUSTER REMOVE NODE on a survivor) and starts a new
// voter with a fresh data directory joining a survivor. Meanwhile a client
// of a survivor writes and reads the cached table without error or stale
// read; after, the new voter counts in the quorum (a second voter can be
// lost) and serves the cached table from memory.
func TestRunbookReplaceAVoter(t *testing.T) {
	e := newClusterEnv(t, 3)
	l := e.cacheKV(t)
	var lost *clusterNode
	for _, nd := range e.nodes {
		if nd != l {
			lost = nd
		}
	}
	stop := make(chan struct{})
	var ops atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	cdb := e.conn(t, l, e.app)
	defer cdb.Close()
	go kvClient(t, cdb, stop, &ops, &wg)

	admin := e.conn(t, l, e.admin)
	defer admin.Close()
	e.kill9(t, lost)
	if _, err := admin.Exec(fmt.Sprintf("ADMIN CLUSTER REMOVE NODE '%s'", lost.id)); err != nil {
		t.Fatalf("ADMIN CLUSTER REMOVE NODE: %v", err)
	}
	dir := t.TempDir()
	fresh := &clusterNode{id: "n4", raft: freePort(t), dataDir: filepath.Join(dir, "data"), cfg: filepath.Join(dir, "tableproxy.yaml")}
	e.addNode(t, fresh, l.raft, false)
	waitFor(t, 20*time.Second, "the new voter in the membership", func() (bool, error) {
		var voter string
		err := admin.QueryRow("SELECT voter FROM tableproxy.cluster_members WHERE id = 'n4'").Scan(&voter)
		return err == nil && voter == "YES", err
	})
	// The new voter is in the quorum: with the leader and it, the cluster
	// takes writes while the third voter is down too.
	var other *clusterNode
	for _, nd := range e.nodes {
		if nd != l && nd != fresh && nd != lost {
			other = nd
		}
	}
	e.kill9(t, other)
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("%d writes and reads checked while a voter was replaced and another lost", ops.Load())
	if ops.Load() < 20 {
		t.Errorf("only %d operations", ops.Load())
	}
	e.waitReadyEverywhere(t, "kv", 1)
	fdb := e.conn(t, fresh, e.app)
	defer fdb.Close()
	hits := e.hits(t, fdb)
	waitFor(t, 10*time.Second, "the new voter to answer from memory", func() (bool, error) {
		var v int
		if err := fdb.QueryRow("SELECT v FROM kv WHERE id = 1").Scan(&v); err != nil {
			return false, err
		}
		return e.hits(t, fdb) > hits, nil
	})
}

// TestRunbookRollingRestart: each member in turn is stopped (SIGTERM) and
// started again with its data directory, as an upgrade of the binary
// does, while a client of another member writes and reads the cached
// table: no error, no stale read; every member answers from memory after.
func TestRunbookRollingRestart(t *testing.T) {
	e := newClusterEnv(t, 3)
	e.cacheKV(t)
	for _, nd := range e.nodes {
		client := e.follower(nd)
		stop := make(chan struct{})
		var ops atomic.Int64
		var wg sync.WaitGroup
		wg.Add(1)
		db := e.conn(t, client, e.app)
		go kvClient(t, db, stop, &ops, &wg)
		time.Sleep(200 * time.Millisecond)
		nd.p.stop(t)
		e.startNode(t, nd)
		time.Sleep(500 * time.Millisecond)
		close(stop)
		wg.Wait()
		db.Close()
		t.Logf("%s restarted: %d writes and reads checked through %s", nd.id, ops.Load(), client.id)
		if t.Failed() {
			return
		}
	}
	e.waitReadyEverywhere(t, "kv", 1)
}

// TestRunbookRestoreAfterLosingAMajority: two of three voters lost for
// good. The survivor keeps serving (statements go to the backend; a write
// cannot take an intent without a quorum, so it goes on and the tables
// are read from the backend). The runbook: stop every member, move each
// one's raft/ directory aside, start one alone (it bootstraps a new
// cluster) and the others joining it, and cache the tables again (the
// catalog was the lost cluster's; the rows are on the backend). After it,
// writes and reads through every member are checked, reads from memory.
func TestRunbookRestoreAfterLosingAMajority(t *testing.T) {
	e := newClusterEnv(t, 3)
	l := e.cacheKV(t)
	survivor := e.follower(l)
	for _, nd := range e.nodes {
		if nd != survivor {
			e.kill9(t, nd)
		}
	}
	db := e.conn(t, survivor, e.app)
	if _, err := db.Exec("UPDATE kv SET v = 5 WHERE id = 1"); err != nil {
		t.Fatalf("a write through the survivor without a quorum: %v", err)
	}
	var v int
	if err := db.QueryRow("SELECT v FROM kv WHERE id = 1").Scan(&v); err != nil || v != 5 {
		t.Fatalf("a read through the survivor: %d, %v", v, err)
	}
	db.Close()

	// The runbook.
	survivor.p.stop(t)
	survivor.p = nil
	for i, nd := range e.nodes {
		if err := os.Rename(filepath.Join(nd.dataDir, "raft"), filepath.Join(nd.dataDir, "raft.lost")); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		join := ""
		if i > 0 {
			join = e.nodes[0].raft
		}
		e.writeConfig(t, nd, join, false)
		e.startNode(t, nd)
	}
	admin := e.conn(t, e.nodes[0], e.admin)
	if _, err := admin.Exec("ALTER TABLE kv CACHE"); err != nil {
		t.Fatalf("caching the table again: %v", err)
	}
	e.waitReadyEverywhere(t, "kv", 1)
	stop := make(chan struct{})
	var ops atomic.Int64
	var wg sync.WaitGroup
	for _, nd := range e.nodes {
		wg.Add(1)
		go kvClient(t, e.conn(t, nd, e.app), stop, &ops, &wg)
		time.Sleep(300 * time.Millisecond)
		close(stop)
		wg.Wait()
		stop = make(chan struct{})
	}
	t.Logf("%d writes and reads checked through the restored cluster", ops.Load())
	for _, nd := range e.nodes {
		ndb := e.conn(t, nd, e.app)
		hits := e.hits(t, ndb)
		waitFor(t, 10*time.Second, nd.id+" to answer from memory", func() (bool, error) {
			var v int
			if err := ndb.QueryRow("SELECT v FROM kv WHERE id = 1").Scan(&v); err != nil {
				return false, err
			}
			return e.hits(t, ndb) > hits, nil
		})
	}
}
