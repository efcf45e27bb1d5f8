package cache

import (
	"strings"
	"sync"
	"time"
)

// An online ADD INDEX ends with a RENAME TABLE that puts in place of the
// table a copy the job has made equal to it row for row, under a lock that
// keeps every writer out. An index changes no row and no column, so a
// cached copy of the table is as exact after that RENAME as before it, and
// its readers need not notice: the job announces its RENAME here before it
// sends it, and the watcher lets exactly that statement through without
// invalidating the table. Any other RENAME of a cached table, or this one
// seen after its announcement ended, invalidates it as usual.
//
// In a cluster the watcher runs on the leader: the proxy running the job
// passes its announcement to every member (cluster.Node.AnnounceSwap), so
// that whichever leads when the RENAME reaches the binary log keeps the
// copy. A member that missed it reloads the table after the swap (its
// reads go to the backend until the copy is loaded again), never a stale
// answer.

// swapTTL bounds how long an announced RENAME waits for the watcher: one
// the watcher has not seen by then (a watcher far behind, a job that died
// between announcing and renaming) invalidates as any RENAME does.
const swapTTL = 10 * time.Minute

// swaps are the RENAME statements announced and not seen yet.
type swaps struct {
	mu       sync.Mutex
	expected map[string]time.Time // statement text → announced at
}

// ExpectSwap announces that rename, exactly as the job will send it, swaps
// in a verified copy of a table: the watcher will not invalidate the
// table for it. cancel withdraws the announcement (the RENAME was not
// sent, or failed); a RENAME that succeeded leaves it to the watcher,
// which forgets it once seen.
func (p *Plugin) ExpectSwap(rename string) (cancel func()) {
	key := strings.TrimSpace(rename)
	p.swaps.mu.Lock()
	defer p.swaps.mu.Unlock()
	if p.swaps.expected == nil {
		p.swaps.expected = map[string]time.Time{}
	}
	p.swaps.expected[key] = time.Now()
	return func() { p.WithdrawSwap(key) }
}

// WithdrawSwap withdraws an announcement of rename: ExpectSwap's cancel,
// and another proxy's withdrawal.
func (p *Plugin) WithdrawSwap(rename string) {
	key := strings.TrimSpace(rename)
	p.swaps.mu.Lock()
	defer p.swaps.mu.Unlock()
	delete(p.swaps.expected, key)
}

// seen reports whether the binary log's statement q is an announced swap,
// and forgets it.
func (s *swaps) seen(q string) bool {
	key := strings.TrimSpace(q)
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.expected[key]
	delete(s.expected, key)
	for k, t := range s.expected {
		if time.Since(t) > swapTTL {
			delete(s.expected, k)
		}
	}
	return ok && time.Since(at) <= swapTTL
}
