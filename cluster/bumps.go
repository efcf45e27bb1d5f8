package cluster

// Version bumps the leader defers while the tables have intents open,
// and commits with a later entry.

import (
	"context"
	"time"

	"tableproxy/lease"
)

func (n *Node) kickFlush() {
	select {
	case n.flushC <- struct{}{}:
	default:
	}
}

// takeDirty empties the deferred bumps.
func (n *Node) takeDirty() []lease.TableID {
	n.dmu.Lock()
	defer n.dmu.Unlock()
	if len(n.dirty) == 0 {
		return nil
	}
	out := make([]lease.TableID, 0, len(n.dirty))
	for id := range n.dirty {
		out = append(out, id)
	}
	clear(n.dirty)
	return out
}

func (n *Node) markDirty(ids []lease.TableID) {
	n.dmu.Lock()
	for _, id := range ids {
		n.dirty[id] = true
	}
	n.dmu.Unlock()
}

// flusher commits the deferred bumps of tables whose intents have all
// closed (woken by the log's applier), and retries the ones an entry
// could not carry.
func (n *Node) flusher() {
	defer n.wg.Done()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-n.flushC:
		case <-t.C:
		}
		n.dmu.Lock()
		var due []lease.TableID
		for id := range n.dirty {
			if n.fsm.table(id).Intents == 0 {
				due = append(due, id)
			}
		}
		n.dmu.Unlock()
		if len(due) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := n.Bump(ctx, due); err != nil {
			n.log.Warn("cluster: a deferred version bump failed; retrying", "err", err)
			n.markDirty(due)
		}
		cancel()
	}
}
