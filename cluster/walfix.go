package cluster

import (
	"github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// truncFiler opens raft-wal's segment files as raft-wal does, except a
// segment that a tail truncation sealed. raft-wal v0.4.0 (and its main
// branch; hashicorp/raft-wal issue 31) records such a segment as sealed
// without writing the index block a sealed segment is read through, so the
// next start fails with "sealed segment has no index block" and the node
// cannot come back. Raft truncates a tail whenever a member holds entries
// the new leader does not (a leader killed with an entry in flight, as the
// fault tests do), so this is an ordinary event.
//
// Such a segment is read instead the way raft-wal recovers its unsealed
// tail: a scan of the file's committed frames rebuilds the index in
// memory. The frames after the truncation point are the entries truncated
// away (later entries went to the next segment); reads stop before them.
// Nothing is written to the file.
type truncFiler struct{ *segment.Filer }

func newTruncFiler(dir string) truncFiler { return truncFiler{segment.NewFiler(dir, fs.New())} }

// Open implements types.SegmentFiler.
func (f truncFiler) Open(info types.SegmentInfo) (types.SegmentReader, error) {
	if info.IndexStart != 0 || info.SealTime.IsZero() {
		return f.Filer.Open(info)
	}
	w, err := f.Filer.RecoverTail(info)
	if err != nil {
		return nil, err
	}
	return truncatedSegment{SegmentWriter: w, max: info.MaxIndex}, nil
}

// truncatedSegment reads a truncated segment up to its last kept entry.
type truncatedSegment struct {
	types.SegmentWriter
	max uint64
}

func (s truncatedSegment) GetLog(idx uint64) (*types.PooledBuffer, error) {
	if idx > s.max {
		return nil, types.ErrNotFound
	}
	return s.SegmentWriter.GetLog(idx)
}
