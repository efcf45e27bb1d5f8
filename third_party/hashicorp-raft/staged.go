// Copyright (c) HashiCorp, Inc.
// SPDX-License-Identifier: MPL-2.0

// This file is not part of hashicorp/raft v1.7.3: it is the one addition of
// this copy (see PATCH.md).

package raft

import (
	"errors"
	"sync"
)

// stagedLogs holds the batch the leader is writing to its own log store, so
// that the replicators can send it to the followers while the leader's write
// and fsync are still running (Raft thesis, section 10.2.1). The leader
// counts itself in the quorum only once its write has returned, so an entry
// still commits only when a majority has it on disk.
//
// At most one batch is staged: the leader loop stages a batch, writes it,
// and clears it before it dispatches the next one.
type stagedLogs struct {
	mu   sync.RWMutex
	logs []*Log // consecutive indexes, in order; nil when nothing is staged
}

// stage makes logs readable by the replicators until clear is called.
func (s *stagedLogs) stage(logs []*Log) {
	s.mu.Lock()
	s.logs = logs
	s.mu.Unlock()
}

// clear is called once the staged batch is in the log store (or its write
// failed); from then on the replicators read the store again.
func (s *stagedLogs) clear() {
	s.mu.Lock()
	s.logs = nil
	s.mu.Unlock()
}

// get returns the staged entry at index, or nil if it is not staged.
func (s *stagedLogs) get(index uint64) *Log {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.logs) == 0 {
		return nil
	}
	first := s.logs[0].Index
	if index < first || index-first >= uint64(len(s.logs)) {
		return nil
	}
	return s.logs[index-first]
}

// errNotStored is what a replicator gets for an entry of a batch whose
// write failed: past the end of the store, not compacted away, so the
// replicator must not send a snapshot instead (ErrLogNotFound would).
var errNotStored = errors.New("log entry not in the store: the leader's write of it failed")

// getLog reads an entry for a replicator: the staged batch first, then the
// log store.
func (r *Raft) getLog(index uint64, log *Log) error {
	if l := r.staged.get(index); l != nil {
		*log = *l
		return nil
	}
	err := r.logs.GetLog(index, log)
	if err != nil {
		if last, lerr := r.logs.LastIndex(); lerr == nil && index > last {
			return errNotStored
		}
	}
	return err
}

// storedLast is the index and term of the last entry in the log store after
// a failed write of the batch that followed (prevIndex, prevTerm): a store
// may have kept part of the batch. If the store cannot say, the entry before
// the batch.
func (r *Raft) storedLast(prevIndex, prevTerm uint64) (uint64, uint64) {
	last, err := r.logs.LastIndex()
	if err != nil || last <= prevIndex {
		return prevIndex, prevTerm
	}
	var l Log
	if err := r.logs.GetLog(last, &l); err != nil {
		return prevIndex, prevTerm
	}
	return l.Index, l.Term
}
