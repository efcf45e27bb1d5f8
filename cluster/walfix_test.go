package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

func openWAL(t *testing.T, dir string, fixed bool) (*wal.WAL, func()) {
	t.Helper()
	meta := &metadb.BoltMetaDB{}
	var w *wal.WAL
	var err error
	if fixed {
		w, err = wal.Open(dir, wal.WithMetaStore(meta), wal.WithSegmentFiler(newTruncFiler(dir)))
	} else {
		w, err = wal.Open(dir, wal.WithMetaStore(meta))
	}
	if err != nil {
		t.Fatal(err)
	}
	return w, func() { _ = w.Close(); _ = meta.Close() }
}

func storeLogs(t *testing.T, w *wal.WAL, from, to uint64, term uint64) {
	t.Helper()
	var logs []*raft.Log
	for i := from; i <= to; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("%d/%d", term, i))})
	}
	if err := w.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
}

// A node whose log tail Raft truncated (entries the new leader did not
// have) must still start: raft-wal alone cannot read the truncated segment
// back (see truncFiler).
func TestWALReopensAfterTailTruncation(t *testing.T) {
	for _, fixed := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "wal")
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		w, closeW := openWAL(t, dir, fixed)
		storeLogs(t, w, 1, 10, 1)
		if err := w.DeleteRange(7, 10); err != nil { // what raft does to a conflicting suffix
			t.Fatal(err)
		}
		storeLogs(t, w, 7, 12, 2)
		closeW()

		w, closeW = openWAL(t, dir, fixed)
		var got raft.Log
		err := w.GetLog(3, &got)
		if !fixed {
			// The scenario must reproduce raft-wal's failure, or the check
			// below proves nothing.
			if err == nil {
				t.Fatal("raft-wal read a truncated segment back by itself: truncFiler may go")
			}
			closeW()
			continue
		}
		if err != nil {
			t.Fatalf("after a tail truncation and a restart: %v", err)
		}
		for i := uint64(1); i <= 12; i++ {
			want := fmt.Sprintf("1/%d", i)
			if i >= 7 {
				want = fmt.Sprintf("2/%d", i)
			}
			if err := w.GetLog(i, &got); err != nil || string(got.Data) != want {
				t.Fatalf("entry %d: %q %v, want %q", i, got.Data, err, want)
			}
		}
		if last, _ := w.LastIndex(); last != 12 {
			t.Fatalf("last index %d", last)
		}
		storeLogs(t, w, 13, 13, 2)
		closeW()
	}
}
