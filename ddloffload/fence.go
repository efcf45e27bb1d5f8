package ddloffload

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

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
	epoch  atomic.Int64 // counts holds: a session marks the transactions it begins during one

	// The backend connections of the sessions held now (by connection id,
	// how many statements): the swap does not wait for their transactions,
	// which cannot go on before it ends.
	waiting map[uint64]int

	// Every session's transaction, by client connection id. InnoDB lists
	// a transaction only from its first read or write, so a session that
	// has sent BEGIN and nothing else yet is open only as far as the proxy
	// knows; the swap waits for such transactions too.
	sessionsMu sync.Mutex // taken when a session starts or ends, and by the swap's waits
	sessions   map[uint32]*sessionTx
}

// sessionTx is what the fence knows of one session's transaction. The
// session writes it on every statement (atomics: no lock on the hot path);
// a swap reads it.
type sessionTx struct {
	// began is the fence epoch when the session was last seen outside a
	// transaction: its current transaction began then or later.
	began atomic.Int64
	// open: the session is in a transaction, or has a statement under
	// way that may begin one.
	open atomic.Bool
	// seen: starting saw the statement under way (a plugin earlier on
	// the chain may answer one, a BEGIN for instance, before this one's
	// OnStatement). Only the session's goroutine touches it.
	seen bool
	// unitStart is when the session's unit of work began: its
	// transaction, or its statement outside one; zero between them. The
	// foreground's transaction latency is measured from it (see
	// Plugin.unitEnded). Only the session's goroutine touches it.
	unitStart time.Time
}

// backendID is the key, in a session's state, of its backend connection's
// id; sessionTxKey, of its *sessionTx.
type (
	backendID    struct{}
	sessionTxKey struct{}
)

// sessionTx returns st's session's transaction record, made and listed on
// the session's first statement.
func (f *fence) sessionTx(st *plugins.Statement) *sessionTx {
	if s, ok := st.Session.Get(sessionTxKey{}).(*sessionTx); ok {
		return s
	}
	s := &sessionTx{}
	if st.Session == nil {
		return s
	}
	st.Session.Set(sessionTxKey{}, s)
	f.sessionsMu.Lock()
	if f.sessions == nil {
		f.sessions = map[uint32]*sessionTx{}
	}
	f.sessions[st.ConnID] = s
	f.sessionsMu.Unlock()
	return s
}

// starting records that st is about to run: outside a transaction, any
// statement may begin one (BEGIN, or any once autocommit is off), so the
// session counts as open from now until its result says otherwise. DDL
// commits whatever is open and begins nothing (and an ADD INDEX this
// plugin takes over waits for its job, whose swap must not wait for it).
func (f *fence) starting(st *plugins.Statement) *sessionTx {
	s := f.sessionTx(st)
	s.seen = true
	s.open.Store(st.Kind != plugins.KindDDL)
	if !st.InTx {
		// Stored after open, so that a swap whose epoch this load missed
		// sees the session open with an older epoch, and waits for it.
		s.began.Store(f.epoch.Load())
	}
	return s
}

// ended records whether st's session is in a transaction after st, as
// the client was told. A statement that another plugin answered before
// starting saw it (a BEGIN the cache answers) begins its transaction now,
// as far as the fence is concerned: it has reached nothing in the backend.
func (f *fence) ended(st *plugins.Statement, out *plugins.Outcome) *sessionTx {
	s := f.sessionTx(st)
	if !s.seen && !st.InTx {
		s.began.Store(f.epoch.Load())
	}
	s.seen = false
	s.open.Store(out.Status&mysql.SERVER_STATUS_IN_TRANS != 0)
	return s
}

// closed forgets connection id's session.
func (f *fence) closed(id uint32) {
	f.sessionsMu.Lock()
	delete(f.sessions, id)
	f.sessionsMu.Unlock()
}

// openBefore lists the sessions (by client connection id) whose
// transaction began before the fence of the given epoch and has not ended.
func (f *fence) openBefore(epoch int64) []uint32 {
	f.sessionsMu.Lock()
	defer f.sessionsMu.Unlock()
	var ids []uint32
	for id, s := range f.sessions {
		if s.open.Load() && s.began.Load() < epoch {
			ids = append(ids, id)
		}
	}
	return ids
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
	epoch int64
}

// hold fences t until release is called. epoch is the fence's: the
// transactions begun before it are those the swap waits for.
//
// The table is fenced before the new epoch is published: a statement that
// read the old epoch (its transaction counts as begun before the fence,
// and the swap waits for it) may find the fence up, never the other way
// round (a transaction of the new epoch that the fence missed).
func (f *fence) hold(t plugins.TableID) (epoch int64, release func()) {
	f.mu.Lock()
	fc := &fenced{done: make(chan struct{}), epoch: f.epoch.Load() + 1}
	if f.tables == nil {
		f.tables = map[plugins.TableID]*fenced{}
	}
	f.tables[t] = fc
	f.n.Add(1)
	f.epoch.Store(fc.epoch)
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

// wait holds st while a table it may touch is fenced, at most max. A
// statement of a transaction begun before a table's fence (see starting)
// is not held by it.
func (f *fence) wait(st *plugins.Statement, max time.Duration) {
	began := int64(-1)
	if st.InTx {
		began = f.sessionTx(st).began.Load()
	}
	f.mu.Lock()
	fences := make(map[plugins.TableID]*fenced, len(f.tables))
	for k, fc := range f.tables {
		if began < 0 || began >= fc.epoch {
			fences[k] = fc
		}
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
	if !st.InTx {
		// A transaction this statement begins, begins during the fence:
		// the swap need not wait for a session it holds.
		f.sessionTx(st).began.Store(f.epoch.Load())
	}
	f.held.Add(1)
	if id := sessionConnID(st); id != 0 {
		f.mu.Lock()
		if f.waiting == nil {
			f.waiting = map[uint64]int{}
		}
		f.waiting[id]++
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			if f.waiting[id]--; f.waiting[id] <= 0 {
				delete(f.waiting, id)
			}
			f.mu.Unlock()
		}()
	}
	timer := time.NewTimer(max)
	defer timer.Stop()
	for _, ch := range waitOn {
		select {
		case <-ch:
		case <-timer.C:
			return
		}
	}
}
