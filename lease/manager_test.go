package lease

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// The Manager's contract, checked on Raft, the Manager the proxy runs (on a
// cluster of one when it is alone). A write's intent closes in the
// background after End, through the log: the checks of what follows a
// write wait for that close (closers) to commit.

func TestIntentBlocksServingAndBumpsVersion(t *testing.T) {
	m, _, _ := newTestRaft(t)
	m.renewOnce()
	tb := m.Table(t1)
	v0, ok := tb.Servable()
	if !ok || v0 != 1 {
		t.Fatalf("new table: %d %v", v0, ok)
	}
	var seen []Version
	m.Subscribe(func(id TableID, v Version) {
		// Raft also tells the current version when an entry leaves a
		// table without intents: count each version once.
		if len(seen) == 0 || seen[len(seen)-1] != v {
			seen = append(seen, v)
		}
	})
	in, err := m.BeginWrite(context.Background(), t1)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tb.Servable(); ok {
		t.Fatal("servable during a write intent")
	}
	got := in.End()
	if got[t1] != 2 {
		t.Fatalf("version after write %d", got[t1])
	}
	m.closers.Wait()
	if v, ok := tb.Servable(); !ok || v != 2 {
		t.Fatalf("after write: %d %v", v, ok)
	}
	if in.End() != nil || tb.Version() != 2 {
		t.Fatal("ending an intent twice changed something")
	}
	if v := m.Invalidate(t1); v != 3 {
		t.Fatalf("invalidate: %d", v)
	}
	if len(seen) != 2 || seen[0] != 2 || seen[1] != 3 {
		t.Fatalf("notifications %v", seen)
	}
	if m.Table(t1) != tb {
		t.Fatal("handle not stable")
	}
}

func TestOverlappingIntents(t *testing.T) {
	m, _, _ := newTestRaft(t)
	m.renewOnce()
	a, _ := m.BeginWrite(context.Background(), t1)
	b, _ := m.BeginWrite(context.Background(), t1)
	a.End()
	if _, ok := m.Table(t1).Servable(); ok {
		t.Fatal("servable while a second intent is open")
	}
	b.End()
	m.closers.Wait()
	// The two writes share one intent in the log: its close bumps once.
	if v, ok := m.Table(t1).Servable(); !ok || v != 2 {
		t.Fatalf("after both: %d %v", v, ok)
	}
}

func TestCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m, _, _ := newTestRaft(t)
	m.renewOnce()
	if _, err := m.BeginWrite(ctx, t1); err == nil {
		t.Fatal("intent opened under a cancelled context")
	}
}

// TestNoStaleServeUnderConcurrency: a reader that observes a write as
// finished (the writer published that its intent ended) must never be told
// an older version is servable. Run with -race.
func TestNoStaleServeUnderConcurrency(t *testing.T) {
	m, _, _ := newTestRaft(t)
	m.renewOnce()
	tb := m.Table(t1)
	var finished atomic.Uint64 // highest version whose write is complete
	var wg, writers sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := 0; i < 2000; i++ {
				in, _ := m.BeginWrite(context.Background(), t1)
				v := in.End()[t1]
				for {
					old := finished.Load()
					if uint64(v) <= old || finished.CompareAndSwap(old, uint64(v)) {
						break
					}
				}
			}
		}()
	}
	errs := make(chan string, 1)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				done := finished.Load()
				if v, ok := tb.Servable(); ok && uint64(v) < done {
					select {
					case errs <- "stale version servable":
					default:
					}
					return
				}
			}
		}()
	}
	// Writers that overlap share an intent, so the version does not count
	// the writes: the readers stop once every write and close is done.
	writers.Wait()
	m.closers.Wait()
	close(stop)
	wg.Wait()
	select {
	case e := <-errs:
		t.Fatal(e)
	default:
	}
}
