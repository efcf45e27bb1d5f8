package e2e

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"tableproxy/internal/testdb"
)

// The backend's binary log, read by the test itself: what a request
// really did to tables, whatever the proxy thought it did. The backend
// logs rows (binlog_format=ROW), so every row a request changed, directly
// or through a trigger, a stored program or dynamic SQL, is a rows event
// of its table; DDL, grants and stored programs are Query events.

// binlogPos is a position in the binary log.
type binlogPos struct {
	file string
	pos  uint32
}

func (p binlogPos) after(q binlogPos) bool {
	if p.file != q.file {
		return p.file > q.file // binlog.000003 < binlog.000004
	}
	return p.pos > q.pos
}

func (p binlogPos) String() string { return fmt.Sprintf("%s:%d", p.file, p.pos) }

// logEvent is one event of the watched schemas: rows of a table, or a
// statement (a Query event).
type logEvent struct {
	at     binlogPos // the position after it
	schema string    // the table's schema, or the Query event's current database
	table  string    // rows events: the table written
	query  string    // Query events: the statement
	// annotate is the statement that wrote the rows (MariaDB's
	// Annotate_rows event before them), for messages.
	annotate string
}

// binlogWatch follows the backend's binary log from where it ends when
// it starts, keeping the events that concern the test's schemas (rows
// events of their tables; Query events run in them, or naming them or the
// test's throwaway users).
type binlogWatch struct {
	syncer *replication.BinlogSyncer
	cancel context.CancelFunc
	done   chan struct{}
	// match says whether a Query event (current schema, text) is the
	// test's.
	match   func(schema, query string) bool
	schemas map[string]bool

	mu      sync.Mutex
	cond    *sync.Cond
	reached binlogPos
	events  []logEvent
	err     error
}

// masterStatus reads where the binary log ends.
func masterStatus(t *testing.T, root *sql.DB) binlogPos {
	t.Helper()
	rows, err := root.Query("SHOW MASTER STATUS")
	if err != nil {
		t.Fatalf("SHOW MASTER STATUS: %v", err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	if !rows.Next() {
		t.Fatal("SHOW MASTER STATUS: no row (is the binary log on?)")
	}
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		t.Fatal(err)
	}
	pos, err := strconv.ParseUint(string(vals[1]), 10, 32)
	if err != nil {
		t.Fatalf("SHOW MASTER STATUS position %q: %v", vals[1], err)
	}
	return binlogPos{file: string(vals[0]), pos: uint32(pos)}
}

// watchBinlog starts following the log as the backend's root account.
func watchBinlog(t *testing.T, b testdb.Backend, root *sql.DB, schemas []string, match func(schema, query string) bool) *binlogWatch {
	t.Helper()
	host, port, err := net.SplitHostPort(b.Addr)
	if err != nil {
		t.Fatalf("backend address %q: %v", b.Addr, err)
	}
	p, _ := strconv.Atoi(port)
	var id [4]byte
	_, _ = rand.Read(id[:])
	cfg := replication.BinlogSyncerConfig{
		ServerID:        binary.LittleEndian.Uint32(id[:])&0x0fffffff | 0x20000000,
		Flavor:          mysql.MariaDBFlavor,
		Host:            host,
		Port:            uint16(p),
		User:            b.RootUser,
		Password:        b.RootPassword,
		HeartbeatPeriod: 200 * time.Millisecond,
		ReadTimeout:     5 * time.Second,
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
		// Which table a rows event writes is all the test needs: the row
		// images of other sessions' big writes are not decoded.
		RowsEventDecodeFunc: func(e *replication.RowsEvent, data []byte) error {
			_, err := e.DecodeHeader(data)
			return err
		},
		// The backend sends MariaDB's Annotate_rows events (the statement
		// behind the rows) only when asked.
		DumpCommandFlag: replication.BINLOG_SEND_ANNOTATE_ROWS_EVENT,
	}
	w := &binlogWatch{syncer: replication.NewBinlogSyncer(cfg), done: make(chan struct{}), match: match,
		schemas: map[string]bool{}}
	for _, s := range schemas {
		w.schemas[s] = true
	}
	w.cond = sync.NewCond(&w.mu)
	start := masterStatus(t, root)
	w.reached = start
	streamer, err := w.syncer.StartSync(mysql.Position{Name: start.file, Pos: start.pos})
	if err != nil {
		t.Fatalf("binary log: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go w.run(ctx, streamer, start.file)
	t.Cleanup(w.close)
	return w
}

func (w *binlogWatch) close() {
	w.cancel()
	<-w.done
	w.syncer.Close()
}

func (w *binlogWatch) run(ctx context.Context, s *replication.BinlogStreamer, file string) {
	defer close(w.done)
	annotate := ""
	for {
		ev, err := s.GetEvent(ctx)
		if err != nil {
			w.mu.Lock()
			if ctx.Err() == nil {
				w.err = err
			}
			w.cond.Broadcast()
			w.mu.Unlock()
			return
		}
		if r, ok := ev.Event.(*replication.RotateEvent); ok {
			file = string(r.NextLogName)
			w.mu.Lock()
			if at := (binlogPos{file, uint32(r.Position)}); at.after(w.reached) {
				w.reached = at
			}
			w.mu.Unlock()
			continue
		}
		if ev.Header.LogPos == 0 {
			continue // (heartbeats and the like do not move the position)
		}
		at := binlogPos{file, ev.Header.LogPos}
		var keep *logEvent
		switch e := ev.Event.(type) {
		case *replication.MariadbAnnotateRowsEvent:
			annotate = string(e.Query)
		case *replication.RowsEvent:
			if e.Table != nil && w.schemas[string(e.Table.Schema)] {
				keep = &logEvent{at: at, schema: string(e.Table.Schema), table: string(e.Table.Table), annotate: annotate}
			}
		case *replication.QueryEvent:
			q := string(e.Query)
			if w.match(string(e.Schema), q) {
				keep = &logEvent{at: at, schema: string(e.Schema), query: q}
			}
			annotate = ""
		case *replication.XIDEvent:
			annotate = ""
		}
		w.mu.Lock()
		if keep != nil {
			w.events = append(w.events, *keep)
		}
		if at.after(w.reached) {
			w.reached = at
		}
		w.cond.Broadcast()
		w.mu.Unlock()
	}
}

// between waits until the stream has read to `to`, and returns the kept
// events after from, up to to.
func (w *binlogWatch) between(t *testing.T, from, to binlogPos) []logEvent {
	t.Helper()
	timer := time.AfterFunc(10*time.Second, func() {
		w.mu.Lock()
		w.cond.Broadcast()
		w.mu.Unlock()
	})
	defer timer.Stop()
	deadline := time.Now().Add(10 * time.Second)
	w.mu.Lock()
	defer w.mu.Unlock()
	for to.after(w.reached) {
		if w.err != nil {
			t.Fatalf("binary log stream: %v", w.err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the binary log stream reached %v in 10 s, want %v", w.reached, to)
		}
		w.cond.Wait()
	}
	var out []logEvent
	keep := w.events[:0]
	for _, ev := range w.events {
		switch {
		case ev.at.after(to):
			keep = append(keep, ev)
		case ev.at.after(from):
			out = append(out, ev)
		}
	}
	w.events = keep // (what is at or before `to` is never asked for again)
	return out
}

// queryEffect is what a Query event of the binary log did, read from its
// first words: the tables whose definition (or, for TRUNCATE, rows) it
// changed; or that it changed accounts or stored programs; or that it is a
// transaction's frame. Unknown: none of these.
type queryEffect struct {
	tables               []tableName
	accounts, programs   bool
	frame, unknown, temp bool
}

// tableName is a table as the log names it: schema (the event's current
// one when the statement does not qualify it) and name.
type tableName struct{ schema, table string }

func (n tableName) String() string { return n.schema + "." + n.table }

// readQuery reads a Query event's statement. It is this test's own
// reading, independent of the proxy's: a small tokenizer and the first
// words of the forms MariaDB writes to its log.
func readQuery(schema, q string) queryEffect {
	toks := sqlWords(q)
	i := 0
	at := func(ws ...string) bool {
		if i < len(toks) {
			for _, w := range ws {
				if strings.EqualFold(toks[i], w) {
					i++
					return true
				}
			}
		}
		return false
	}
	skipTo := func(ws ...string) bool { // (DEFINER=... ALGORITHM=... SQL SECURITY ...)
		for i < len(toks) {
			if at(ws...) {
				return true
			}
			i++
		}
		return false
	}
	name := func() (tableName, bool) {
		if i >= len(toks) || toks[i] == "," || toks[i] == "(" || toks[i] == "." {
			return tableName{}, false
		}
		first := unquoteIdent(toks[i])
		i++
		if i+1 < len(toks) && toks[i] == "." {
			second := unquoteIdent(toks[i+1])
			i += 2
			return tableName{first, second}, true
		}
		return tableName{schema, first}, true
	}
	list := func(sep string) []tableName {
		var out []tableName
		for {
			n, ok := name()
			if !ok {
				return out
			}
			out = append(out, n)
			if sep != "" && at(sep) {
				continue
			}
			if !at(",") {
				return out
			}
		}
	}
	ifExists := func() {
		if at("IF") {
			at("NOT")
			at("EXISTS")
		}
	}
	if i+1 < len(toks) && strings.EqualFold(toks[0], "SET") && strings.EqualFold(toks[1], "STATEMENT") {
		// SET STATEMENT var = value, ... FOR statement: the log holds it
		// whole.
		for depth := 0; i < len(toks); i++ {
			switch {
			case toks[i] == "(":
				depth++
			case toks[i] == ")":
				depth--
			case depth == 0 && strings.EqualFold(toks[i], "FOR"):
				return readQuery(schema, strings.Join(toks[i+1:], " "))
			}
		}
	}
	switch {
	case at("BEGIN", "COMMIT", "ROLLBACK", "XA", "SAVEPOINT", "START"):
		return queryEffect{frame: true}
	case at("GRANT", "REVOKE", "FLUSH"):
		return queryEffect{accounts: true}
	case at("SET"):
		if at("PASSWORD") || at("DEFAULT") {
			return queryEffect{accounts: true}
		}
	case at("TRUNCATE"):
		at("TABLE")
		if n, ok := name(); ok {
			return queryEffect{tables: []tableName{n}}
		}
	case at("RENAME"):
		if at("USER") {
			return queryEffect{accounts: true}
		}
		if at("TABLE", "TABLES") {
			return queryEffect{tables: list("TO")}
		}
	case at("OPTIMIZE", "ANALYZE", "REPAIR"):
		at("NO_WRITE_TO_BINLOG", "LOCAL")
		if at("TABLE", "TABLES") {
			return queryEffect{tables: list("")}
		}
	case at("CREATE", "ALTER", "DROP"):
		verb := strings.ToUpper(toks[i-1])
		at("OR")
		at("REPLACE")
		temporary := at("TEMPORARY")
		at("ONLINE")
		at("IGNORE")
		at("UNIQUE", "FULLTEXT", "SPATIAL")
		switch {
		case at("USER", "ROLE"):
			return queryEffect{accounts: true}
		case at("DATABASE", "SCHEMA"):
			return queryEffect{unknown: true}
		case at("TABLE", "TABLES", "SEQUENCE", "VIEW"):
			ifExists()
			if verb == "DROP" {
				return queryEffect{tables: list(""), temp: temporary}
			}
			n, ok := name()
			if !ok {
				break
			}
			out := queryEffect{tables: []tableName{n}, temp: temporary}
			if verb == "ALTER" { // ALTER TABLE a RENAME [TO] b
				for j := i; j+1 < len(toks); j++ {
					if strings.EqualFold(toks[j], "RENAME") {
						i = j + 1
						if at("INDEX", "KEY", "COLUMN") {
							break
						}
						at("TO", "AS")
						if m, ok := name(); ok {
							out.tables = append(out.tables, m)
						}
						break
					}
				}
			}
			return out
		case at("INDEX"):
			ifExists()
			if _, ok := name(); ok && at("ON") {
				if n, ok := name(); ok {
					return queryEffect{tables: []tableName{n}}
				}
			}
		default:
			// CREATE DEFINER=... VIEW / TRIGGER / PROCEDURE / FUNCTION /
			// EVENT: what follows the options says which.
			if skipTo("VIEW", "TRIGGER", "PROCEDURE", "FUNCTION", "EVENT", "PACKAGE") {
				if !strings.EqualFold(toks[i-1], "VIEW") {
					return queryEffect{programs: true}
				}
				ifExists()
				if n, ok := name(); ok {
					return queryEffect{tables: []tableName{n}}
				}
			}
		}
	}
	return queryEffect{unknown: true}
}

func unquoteIdent(s string) string {
	if len(s) >= 2 && s[0] == '`' && s[len(s)-1] == '`' {
		return strings.ReplaceAll(s[1:len(s)-1], "``", "`")
	}
	return s
}

// sqlWords cuts a statement into words (identifiers, keywords, numbers,
// quoted identifiers), string literals and single punctuation characters,
// leaving out comments (the code of executable comments is kept: the log
// holds what the server ran, and MariaDB writes its own
// /* generated by server */ remarks).
func sqlWords(q string) []string {
	var out []string
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case strings.HasPrefix(q[i:], "/*!") || strings.HasPrefix(q[i:], "/*M!"):
			i += strings.IndexByte(q[i:], '!') + 1
			for i < len(q) && q[i] >= '0' && q[i] <= '9' {
				i++
			}
		case strings.HasPrefix(q[i:], "*/"):
			i += 2
		case strings.HasPrefix(q[i:], "/*"):
			end := strings.Index(q[i+2:], "*/")
			if end < 0 {
				return out
			}
			i += end + 4
		case c == '#' || strings.HasPrefix(q[i:], "-- "):
			end := strings.IndexByte(q[i:], '\n')
			if end < 0 {
				return out
			}
			i += end + 1
		case c == '`' || c == '\'' || c == '"':
			j := i + 1
			for j < len(q) {
				if q[j] == '\\' && c != '`' {
					j += 2
					continue
				}
				if q[j] == c {
					if j+1 < len(q) && q[j+1] == c {
						j += 2
						continue
					}
					break
				}
				j++
			}
			if j >= len(q) {
				j = len(q) - 1
			}
			out = append(out, q[i:j+1])
			i = j + 1
		case c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80:
			j := i
			for j < len(q) && (q[j] == '_' || q[j] == '$' || q[j] >= '0' && q[j] <= '9' || q[j] >= 'a' && q[j] <= 'z' || q[j] >= 'A' && q[j] <= 'Z' || q[j] >= 0x80) {
				j++
			}
			out = append(out, q[i:j])
			i = j
		default:
			out = append(out, q[i:i+1])
			i++
		}
	}
	return out
}
