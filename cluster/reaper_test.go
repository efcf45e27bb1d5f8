package cluster

import (
	"context"
	"net"
	"testing"
	"time"
)

// testDeadAfter is the tests' remove_dead_after: over the tests' lease
// plus margin (700 ms), so a member is removed only once its lease is out.
const testDeadAfter = 1500 * time.Millisecond

// fleet starts three voters and the named non-voters, every one ready to
// remove silent non-voters should it lead.
func fleet(t *testing.T, sidecars ...string) (voters, side []*member) {
	t.Helper()
	a := startMemberCfg(t, Config{ID: "a", DataDir: t.TempDir(), DeadAfter: testDeadAfter}, nil)
	waitUntil(t, 5*time.Second, "a leads", a.n.IsLeader)
	voters = []*member{a}
	for _, id := range []string{"b", "c"} {
		voters = append(voters, startMemberCfg(t, Config{ID: id, DataDir: t.TempDir(), Join: a.n.Addr(), DeadAfter: testDeadAfter}, nil))
	}
	for _, id := range sidecars {
		side = append(side, startMemberCfg(t, Config{ID: id, DataDir: t.TempDir(), Join: voters[1].n.Addr(), NonVoter: true, DeadAfter: testDeadAfter}, nil))
	}
	all := append(append([]*member{}, voters...), side...)
	waitUntil(t, 10*time.Second, "every member with a lease", func() bool {
		list, _ := a.n.Members()
		if len(list) != len(all) {
			return false
		}
		for _, mb := range all {
			if !mb.m.LeaseValid() {
				return false
			}
		}
		return true
	})
	return voters, side
}

func memberStates(t *testing.T, n *Node) map[string]Member {
	t.Helper()
	list, err := n.Members()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Member{}
	for _, m := range list {
		out[m.ID] = m
	}
	return out
}

// A non-voter that dies is removed once it has been silent for DeadAfter
// by the leader's clock; one that leaves is removed at once; a voter that
// dies stays, shown unreachable, whatever the time.
func TestSilentNonVoterRemovedVoterKept(t *testing.T) {
	voters, side := fleet(t, "s1", "s2")
	leader := voters[0].n

	side[1].m.Close() // a clean stop: serving ends, then the node leaves
	if err := side[1].n.Leave(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := memberStates(t, leader)["s2"]; ok {
		t.Fatal("a non-voter that left is still a member")
	}
	side[1].n.Close()

	killed := time.Now()
	side[0].close() // as kill -9: no leave
	voters[2].close()
	waitUntil(t, testLease.Lease+testLease.Margin+time.Second, "s1 and c unreachable", func() bool {
		ms := memberStates(t, leader)
		return ms["s1"].State == "unreachable" && ms["c"].State == "unreachable"
	})
	ms := memberStates(t, leader)
	if ri := ms["s1"].RemoveIn; ri < 0 || ri > testDeadAfter {
		t.Fatalf("s1's removal is due in %s", ri)
	}
	if ri := ms["c"].RemoveIn; ri != -1 {
		t.Fatalf("a voter's removal is due in %s", ri)
	}
	waitUntil(t, testDeadAfter+2*time.Second, "s1 removed", func() bool {
		_, ok := memberStates(t, leader)["s1"]
		return !ok
	})
	if took := time.Since(killed); took < testDeadAfter {
		t.Fatalf("s1 was removed %s after it died, before remove_dead_after (%s)", took, testDeadAfter)
	}
	time.Sleep(testDeadAfter)
	ms = memberStates(t, leader)
	if c, ok := ms["c"]; !ok || c.State != "unreachable" {
		t.Fatalf("the dead voter: %+v (present %v)", c, ok)
	}
	if len(ms) != 3 || ms["a"].State != "live" || ms["b"].State != "live" {
		t.Fatalf("members: %+v", ms)
	}
}

// A non-voter removed while it was alive (cut off for longer than
// DeadAfter, or removed by an admin) joins again and serves.
func TestRemovedNonVoterJoinsAgain(t *testing.T) {
	voters, side := fleet(t, "s1")
	if err := voters[0].n.RemoveNode(context.Background(), "s1"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "s1 back, with a lease", func() bool {
		m, ok := memberStates(t, voters[0].n)["s1"]
		return ok && m.State == "live" && !m.Voter && side[0].m.LeaseValid()
	})
}

// A node whose Join is its own RaftListen is the seed: it bootstraps, and
// a node joining through it joins its cluster.
func TestSeedJoiningItselfBootstraps(t *testing.T) {
	port := freeTCPAddr(t)
	a := startMemberCfg(t, Config{ID: "a", DataDir: t.TempDir(), Join: port, RaftListen: port}, nil)
	waitUntil(t, 5*time.Second, "the seed leads", a.n.IsLeader)
	b := startMemberCfg(t, Config{ID: "b", DataDir: t.TempDir(), Join: port}, nil)
	waitUntil(t, 5*time.Second, "b a member with a lease", func() bool {
		_, ok := memberStates(t, a.n)["b"]
		return ok && b.m.LeaseValid()
	})
}

// freeTCPAddr is a loopback address with a port free a moment ago.
func freeTCPAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
