package cluster

// The leader's revocation of the other proxies' leases for a write.

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"tableproxy/lease"
)

// writer is the process that proposed an intent. The leader does not ask
// it to stop serving the intent's tables: it stops its own copies until it
// has applied the open (see lease.Log.OpenIntent), and the answer to its
// proposal is what tells it the index. Only that process is spared: a
// later incarnation of the node, which never saw the proposal, is asked
// like any other proxy.
type writer struct {
	node string
	inc  uint64
}

func (h holder) is(w writer) bool { return h.node == w.node && h.inc == w.inc }

// revokeEarly asks every other proxy whose lease may be valid now, but
// the intent's writer, to stop serving tables until it has applied intent,
// and returns where each answer (nil: it acknowledged) will arrive.
func (n *Node) revokeEarly(ctx context.Context, tables []lease.TableID, intent string, proposer writer) map[string]chan error {
	body, _ := json.Marshal(revokeRequest{Tables: tables, Intent: intent})
	out := map[string]chan error{}
	for _, h := range n.fsm.holders(time.Now(), n.cfg.LeaseHold) {
		if h.node == n.cfg.ID || h.is(proposer) {
			continue
		}
		ch := make(chan error, 1)
		out[h.node] = ch
		go func(h holder) {
			rctx, cancel := context.WithDeadline(ctx, h.expires)
			defer cancel()
			ch <- n.post(rctx, h.addr, "/cluster/v1/revoke", body, nil)
		}(h)
	}
	return out
}

// revoke makes every proxy whose lease may still be valid, now that the
// intent at index is applied here, stop serving tables (the writer, as in
// revokeEarly, stops its own): the ones asked early have answered or are
// waited for; the others (a renewal applied in between) are asked now, by
// index. One that does not answer is waited out until its lease has
// expired by this node's clock. This node applied the intent before Apply
// returned, so its own copies are already stopped.
func (n *Node) revoke(ctx context.Context, tables []lease.TableID, index uint64, proposer writer, early map[string]chan error) error {
	body, _ := json.Marshal(revokeRequest{Tables: tables, Index: index})
	var wg sync.WaitGroup
	for _, h := range n.fsm.holders(time.Now(), n.cfg.LeaseHold) {
		if h.node == n.cfg.ID || h.is(proposer) {
			continue
		}
		wg.Add(1)
		go func(h holder, asked chan error) {
			defer wg.Done()
			var err error
			if asked != nil {
				select {
				case err = <-asked:
				case <-ctx.Done():
					return
				}
			} else {
				rctx, cancel := context.WithDeadline(ctx, h.expires)
				err = n.post(rctx, h.addr, "/cluster/v1/revoke", body, nil)
				cancel()
			}
			if err != nil {
				n.awaitGone(ctx, h, body)
			}
		}(h, early[h.node])
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	return nil
}

// revokeRequest asks a proxy to stop serving tables until it has applied
// the log up to Index or, when Index is 0, the intent named Intent.
// awaitGone returns once h, which did not acknowledge a revocation, no
// longer serves: it acknowledges a retry, or nothing listens at its
// address any more, or its lease has expired by this node's clock. A
// proxy keeps its cluster address open for as long as it may serve from
// memory (lease.Raft stops serving in Close, before Node.Close closes the
// listener, and the listener never closes by itself), so a refused
// connection means its process is gone: a killed leader's successor need
// not wait out its lease. A paused or unreachable proxy still accepts
// connections in its kernel, or times out, and is waited out.
func (n *Node) awaitGone(ctx context.Context, h holder, body []byte) {
	for time.Now().Before(h.expires) {
		c, err := net.DialTimeout("tcp", h.addr, min(time.Until(h.expires), 250*time.Millisecond))
		if errors.Is(err, syscall.ECONNREFUSED) {
			return
		}
		if c != nil {
			c.Close()
			rctx, cancel := context.WithDeadline(ctx, h.expires)
			err = n.post(rctx, h.addr, "/cluster/v1/revoke", body, nil)
			cancel()
			if err == nil {
				return
			}
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return
		case <-n.stop:
			return
		}
	}
}

type revokeRequest struct {
	Tables []lease.TableID `json:"tables"`
	Index  uint64          `json:"index,omitempty"`
	Intent string          `json:"intent,omitempty"`
}
