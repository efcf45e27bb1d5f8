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
// means the new table. Statements inside a transaction are never held: the
// transaction may hold locks the swap is waiting for.
type fence struct {
	n      atomic.Int32 // fenced tables; read on every statement
	mu     sync.Mutex   // guards tables; contended only while a swap runs
	tables map[tableKey]chan struct{}
	held   atomic.Int64 // statements held, ever
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
	if st.InTx {
		return
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
