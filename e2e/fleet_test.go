package e2e

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"
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
