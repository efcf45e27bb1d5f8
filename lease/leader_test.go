package lease

import (
	"context"
	"net"
	"testing"
	"time"
)

// The leader has every other proxy whose lease may be valid stop serving
// an intent's tables: one that stored the intent's entry has; the others
// are asked, by index; not itself, not the intent's writer, and not a
// proxy whose lease has run out.
func TestRaftRevokeOthers(t *testing.T) {
	m, f, _ := newTestRaft(t)
	f.appended["n3"] = 7
	m.Renewed(Holder{Node: "n1", Inc: 1, Addr: "self"}) // this node (fakeLog's ID)
	m.Renewed(Holder{Node: "n2", Inc: 4, Addr: "writer"})
	m.Renewed(Holder{Node: "n3", Inc: 1, Addr: "reader"})
	m.Renewed(Holder{Node: "n4", Inc: 1, Addr: "gone"})
	m.holders["n4"].renewed = time.Now().Add(-m.cfg.Hold())
	index, err := m.RevokeOthers(context.Background(), []TableID{t1}, "n2/4/1", Writer{Node: "n2", Inc: 4}, func() (uint64, error) {
		m.Renewed(Holder{Node: "n5", Inc: 1, Addr: "late"}) // renewed while the open committed
		return 7, nil
	})
	if err != nil || index != 7 {
		t.Fatalf("RevokeOthers: %d, %v", index, err)
	}
	f.sentMu.Lock()
	defer f.sentMu.Unlock()
	if len(f.sent) != 1 || len(f.sent["late"]) != 1 {
		t.Fatalf("revocations sent: %+v (want one, to the proxy that had not stored the intent)", f.sent)
	}
	if r := f.sent["late"][0]; r.Index != 7 || r.Intent != "" || len(r.Tables) != 1 {
		t.Fatalf("the revocation after the open committed: %+v", r)
	}
}

// A proxy that does not acknowledge is waited out until its lease has
// run out; one whose address refuses connections is gone, and is not.
func TestRaftRevokeOthersWaitsOutTheSilent(t *testing.T) {
	m, f, _ := newTestRaft(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := closed.Addr().String()
	closed.Close()
	f.deaf[ln.Addr().String()], f.unreached[gone] = true, true
	m.Renewed(Holder{Node: "n2", Inc: 1, Addr: gone})
	start := time.Now()
	if _, err := m.RevokeOthers(context.Background(), []TableID{t1}, "i", Writer{}, func() (uint64, error) { return 1, nil }); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > m.cfg.Hold()/2 {
		t.Fatalf("a proxy that is gone was waited for %s", took)
	}
	m.Renewed(Holder{Node: "n3", Inc: 1, Addr: ln.Addr().String()})
	start = time.Now()
	if _, err := m.RevokeOthers(context.Background(), []TableID{t1}, "j", Writer{}, func() (uint64, error) { return 2, nil }); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < m.cfg.Hold()-100*time.Millisecond || took > m.cfg.Hold()+time.Second {
		t.Fatalf("a silent proxy was waited for %s, want its lease (%s)", took, m.cfg.Hold())
	}
}
