package ddloffload

import (
	"sync"
	"sync/atomic"
	"time"

	"tableproxy/plugins"
)

// fence holds statements on tables being swapped. While a table is fenced,
// a statement that may touch it waits in OnStatement until the swap ends
// (bounded), then goes on to the backend, where the table's name by then
// means the new table. Statements of a transaction that was open when the
// fence began are never held: it may hold locks the swap is waiting for
// (the swap waits for such transactions to end, see waitTransactions).
// Those of a transaction begun since are held like any other: it holds
// nothing on the table yet, and had it read the table, the RENAME queued
// for its exclusive lock would deadlock with the transaction's next write
// there, which MariaDB ends by failing the transaction with 1213.
type fence struct {
	n      atomic.Int32 // fenced tables; read on every statement
	mu     sync.Mutex   // guards tables and waiting; contended only while a swap runs
	tables map[plugins.TableID]*fenced
	held   atomic.Int64 // statements held, ever
	// txs is the proxy's account of its sessions' transactions: each
	// fence's epoch is a mark on its clock, and the swap waits for the
	// sessions it lists open before that mark. InnoDB lists a transaction
	// only from its first read or write, so a session that has sent BEGIN
	// and nothing else yet is open only as far as the proxy knows.
	txs plugins.Transactions

	// The sessions held now (how many statements each), by their backend
	// connection's id and by their client connection id: the swap does
	// not wait for their transactions, which cannot go on before it ends.
	waiting map[uint64]int
	holding map[uint32]int
}

// backendID is the key, in a session's state, of its backend connection's
// id; heldFloor, of the epoch of the newest fence that held a statement of
// the session outside a transaction: a transaction that statement begins,
// begins during that fence (see wait).
type (
	backendID struct{}
	heldFloor struct{}
)

// openBefore lists the sessions (by client connection id) whose
// transaction began before the fence of the given epoch and has not ended,
// but those the fence holds.
func (f *fence) openBefore(epoch uint64) []uint32 {
	ids := f.txs.OpenBefore(epoch)
	f.mu.Lock()
	defer f.mu.Unlock()
	open := ids[:0]
	for _, id := range ids {
		if f.holding[id] == 0 {
			open = append(open, id)
		}
	}
	return open
}

// sessionConnID is the id of st's backend connection, 0 if unknown.
func sessionConnID(st *plugins.Statement) uint64 {
	if id, ok := st.Session.Get(backendID{}).(uint64); ok {
		return id
	}
	if st.Backend == nil || st.Session == nil {
		return 0
	}
	res, err := st.Backend.Query("SELECT CONNECTION_ID()")
	if err != nil || res.Resultset == nil || res.RowNumber() == 0 {
		return 0
	}
	id, _ := res.GetUint(0, 0)
	st.Session.Set(backendID{}, id)
	return id
}

// isWaiting reports whether backend connection id's session is held.
func (f *fence) isWaiting(id uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waiting[id] > 0
}

func (f *fence) active() bool { return f.n.Load() > 0 }

// fenced is one table's fence: closed when the swap ends; epoch tells the
// transactions begun before it (not held) from those begun since (held).
type fenced struct {
	done  chan struct{}
	epoch uint64
}

// hold fences t until release is called. epoch is the fence's, a mark on
// the proxy's transaction clock: the transactions begun before it are
// those the swap waits for.
//
// The table is fenced before the clock moves: a statement whose
// transaction began before the mark (the swap waits for it) may find the
// fence up, never the other way round (a transaction begun after the mark
// that the fence missed).
func (f *fence) hold(t plugins.TableID) (epoch uint64, release func()) {
	f.mu.Lock()
	fc := &fenced{done: make(chan struct{})}
	if f.tables == nil {
		f.tables = map[plugins.TableID]*fenced{}
	}
	f.tables[t] = fc
	f.n.Add(1)
	fc.epoch = f.txs.Mark()
	f.mu.Unlock()
	var once sync.Once
	return fc.epoch, func() {
		once.Do(func() {
			f.mu.Lock()
			delete(f.tables, t)
			f.mu.Unlock()
			f.n.Add(-1)
			close(fc.done)
		})
	}
}

// wait holds st while a table it may touch is fenced, at most bound. A
// statement of a transaction begun before a table's fence (the proxy's
// TxView.Since) is not held by it.
func (f *fence) wait(st *plugins.Statement, bound time.Duration) {
	var began uint64
	if st.InTx {
		began = st.Tx.Since()
		if floor, ok := st.Session.Get(heldFloor{}).(uint64); ok {
			began = max(began, floor) // (a later transaction's Since is past it anyway)
		}
	}
	f.mu.Lock()
	fences := make(map[plugins.TableID]*fenced, len(f.tables))
	var newest uint64
	for k, fc := range f.tables {
		if !st.InTx || began >= fc.epoch {
			fences[k] = fc
		}
		newest = max(newest, fc.epoch)
	}
	f.mu.Unlock()
	if len(fences) == 0 {
		return
	}
	a, _ := st.Analysis() // (a request that mixes CACHE with others names its tables too)
	var waitOn []chan struct{}
	if a.Unparsed {
		// Unparsable: it may touch anything fenced.
		for _, fc := range fences {
			waitOn = append(waitOn, fc.done)
		}
	} else {
		for _, t := range a.Named {
			if fc, hit := fences[t]; hit {
				waitOn = append(waitOn, fc.done)
			}
		}
	}
	if len(waitOn) == 0 {
		return
	}
	if !st.InTx && st.Session != nil {
		// A transaction this statement begins, begins during the fence.
		st.Session.Set(heldFloor{}, newest)
	}
	f.held.Add(1)
	// The swap does not wait for a session it holds.
	id, conn := sessionConnID(st), st.ConnID
	f.mu.Lock()
	if f.waiting == nil {
		f.waiting, f.holding = map[uint64]int{}, map[uint32]int{}
	}
	if id != 0 {
		f.waiting[id]++
	}
	f.holding[conn]++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		if id != 0 {
			if f.waiting[id]--; f.waiting[id] <= 0 {
				delete(f.waiting, id)
			}
		}
		if f.holding[conn]--; f.holding[conn] <= 0 {
			delete(f.holding, conn)
		}
		f.mu.Unlock()
	}()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	for _, ch := range waitOn {
		select {
		case <-ch:
		case <-timer.C:
			return
		}
	}
}
