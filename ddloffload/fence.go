package ddloffload

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"

	"tableproxy/plugins"
)

// tableKey names a table.
type tableKey struct{ schema, table string }

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
	tables map[tableKey]chan struct{}
	held   atomic.Int64 // statements held, ever
	epoch  atomic.Int64 // counts holds: a session marks the transactions it begins during one

	// The backend connections of the sessions held now (by connection id,
	// how many statements): the swap does not wait for their transactions,
	// which cannot go on before it ends.
	waiting map[uint64]int
}

// fenceEpoch is the key, in a session's state, of the epoch of the fence
// during which it was last seen outside a transaction; backendID, of its
// backend connection's id.
type (
	fenceEpoch struct{}
	backendID  struct{}
)

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

// hold fences t until release is called.
func (f *fence) hold(t tableKey) (release func()) {
	ch := make(chan struct{})
	f.mu.Lock()
	if f.tables == nil {
		f.tables = map[tableKey]chan struct{}{}
	}
	f.tables[t] = ch
	f.mu.Unlock()
	f.epoch.Add(1)
	f.n.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			delete(f.tables, t)
			f.mu.Unlock()
			f.n.Add(-1)
			close(ch)
		})
	}
}

// wait holds st while a table it may touch is fenced, at most max.
func (f *fence) wait(st *plugins.Statement, pool *sync.Pool, max time.Duration) {
	epoch := f.epoch.Load()
	switch {
	case !st.InTx && st.Session != nil:
		// A transaction this statement begins is new.
		st.Session.Set(fenceEpoch{}, epoch)
	case st.InTx:
		if e, _ := st.Session.Get(fenceEpoch{}).(int64); e != epoch {
			return // open before the fence
		}
	}
	f.mu.Lock()
	chans := make(map[tableKey]chan struct{}, len(f.tables))
	for k, ch := range f.tables {
		chans[k] = ch
	}
	f.mu.Unlock()
	if len(chans) == 0 {
		return
	}
	pr := pool.Get().(*parser.Parser)
	tables, ok := tablesIn(pr, st.SQL, st.DB)
	pool.Put(pr)
	var waitOn []chan struct{}
	if !ok {
		// Unparsable: it may touch anything fenced.
		for _, ch := range chans {
			waitOn = append(waitOn, ch)
		}
	} else {
		for _, t := range tables {
			if ch, hit := chans[t]; hit {
				waitOn = append(waitOn, ch)
			}
		}
	}
	if len(waitOn) == 0 {
		return
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

// tablesIn lists the tables a statement names (unqualified names in db).
// ok is false when the statement does not parse.
func tablesIn(p *parser.Parser, sql, db string) (tables []tableKey, ok bool) {
	stmts, _, err := p.ParseSQL(sql)
	if err != nil {
		return nil, false
	}
	v := &tableCollector{db: db}
	for _, s := range stmts {
		s.Accept(v)
	}
	return v.tables, true
}

type tableCollector struct {
	db     string
	tables []tableKey
}

func (v *tableCollector) Enter(n ast.Node) (ast.Node, bool) {
	if tn, ok := n.(*ast.TableName); ok {
		schema := tn.Schema.O
		if schema == "" {
			schema = v.db
		}
		v.tables = append(v.tables, tableKey{strings.Clone(schema), strings.Clone(tn.Name.O)})
	}
	return n, false
}

func (v *tableCollector) Leave(n ast.Node) (ast.Node, bool) { return n, true }
