package cluster

// Announced swaps. An online ADD INDEX job ends with a RENAME that puts a
// verified copy of a table in its place; the job announces that RENAME to
// the cache (cache.ExpectSwap), whose binary-log watcher then keeps the
// table's cached copy through it. In a cluster that watcher runs on the
// leader, which may not be the proxy running the job, and may change
// before the RENAME reaches the log: so the announcement goes to every
// member. A member that misses it (unreachable, or joined since) sees an
// ordinary RENAME and reloads the table: its readers go to the backend
// for that moment, never to a stale copy.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// announceTimeout bounds how long a job waits for the members to take its
// announcement: the RENAME goes out after it, answered or not.
const announceTimeout = 2 * time.Second

// SwapHandler takes a swap another member announced (withdraw false) or
// withdrew.
type SwapHandler func(rename string, withdraw bool)

type swapRequest struct {
	Rename   string `json:"rename"`
	Withdraw bool   `json:"withdraw,omitempty"`
}

// SetSwapHandler installs what this node does with the swaps other
// members announce.
func (n *Node) SetSwapHandler(h SwapHandler) { n.swaps.Store(&h) }

// AnnounceSwap tells every other member of rename, or withdraws it, all at
// once, and waits for their answers at most announceTimeout. It returns
// the members that did not take it.
func (n *Node) AnnounceSwap(ctx context.Context, rename string, withdraw bool) (missed []string) {
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return nil
	}
	body, _ := json.Marshal(swapRequest{Rename: rename, Withdraw: withdraw})
	ctx, cancel := context.WithTimeout(ctx, announceTimeout)
	defer cancel()
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, s := range cf.Configuration().Servers {
		if s.ID == raft.ServerID(n.cfg.ID) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.post(ctx, string(s.Address), "/cluster/v1/swap", body, nil); err != nil {
				mu.Lock()
				missed = append(missed, string(s.ID))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return missed
}

// serveSwap is the member's end of AnnounceSwap.
func (n *Node) serveSwap(w http.ResponseWriter, r *http.Request) {
	var sr swapRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&sr); err != nil || sr.Rename == "" {
		http.Error(w, "want {rename, withdraw}", http.StatusBadRequest)
		return
	}
	if h := n.swaps.Load(); h != nil {
		(*h)(sr.Rename, sr.Withdraw)
	}
	writeJSON(w, map[string]bool{"ok": true})
}
