package digest

import (
	"fmt"
	"sort"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/plugins"
)

// The virtual tables tableproxy.query_digests and cache_candidates
// (package vschema answers SELECTs of them), and EXPLAIN CACHE.

var digestColumns = []string{"node_id", "digest", "digest_text", "schema_name", "user",
	"first_seen", "last_seen", "count", "sum_latency_us", "min_latency_us", "max_latency_us",
	"p99_latency_us", "rows_sent", "rows_affected", "errors",
	"memory_count", "result_cache_count", "backend_count", "top_pass_reason"}

var digestNumeric = numeric("count", "sum_latency_us", "min_latency_us", "max_latency_us",
	"p99_latency_us", "rows_sent", "rows_affected", "errors", "memory_count", "result_cache_count", "backend_count")

var candidateColumns = []string{"table_schema", "table_name", "table_rows", "data_bytes", "index_bytes",
	"memory_bytes", "reads_per_sec", "proxy_writes_per_sec", "bypass_writes_per_sec", "covered_share",
	"saved_reads_per_sec", "write_penalty_ms_per_sec", "verdict", "reason"}

var candidateNumeric = numeric("table_rows", "data_bytes", "index_bytes", "memory_bytes")

func numeric(cols ...string) map[string]bool {
	m := map[string]bool{}
	for _, c := range cols {
		m[c] = true
	}
	return m
}

// Digests is tableproxy.query_digests.
type Digests struct{ p *Plugin }

// Digests returns the table of the digests.
func (p *Plugin) Digests() Digests { return Digests{p} }

// Columns implements vschema.Table.
func (Digests) Columns() []string { return digestColumns }

// Numeric implements vschema.Table.
func (Digests) Numeric() map[string]bool { return digestNumeric }

// Rows implements vschema.Table: the digests, most counted first.
func (t Digests) Rows() [][]any {
	entries, _ := t.p.store.Snapshot()
	sort.Slice(entries, func(i, j int) bool { return entries[i].Count > entries[j].Count })
	rows := make([][]any, len(entries))
	for i := range entries {
		e := &entries[i]
		pass := ""
		if r := e.TopPass(); r.String() != "none" {
			pass = r.String()
		}
		rows[i] = []any{t.p.node, e.Digest, e.Text, e.Schema, e.User, utc(e.First), utc(e.Last),
			int64(e.Count), us(e.Sum), us(e.Min), us(e.Max), us(e.P99()), int64(e.RowsSent), int64(e.RowsChanged),
			int64(e.Errors), int64(e.Where[atMemory]), int64(e.Where[atResults]), int64(e.Where[atBackend]), pass}
	}
	return rows
}

func us(d time.Duration) int64 { return int64(d / time.Microsecond) }

func utc(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000000") }

// Candidates is tableproxy.cache_candidates.
type Candidates struct{ p *Plugin }

// Candidates returns the advisor's table.
func (p *Plugin) Candidates() Candidates { return Candidates{p} }

// Columns implements vschema.Table.
func (Candidates) Columns() []string { return candidateColumns }

// Numeric implements vschema.Table.
func (Candidates) Numeric() map[string]bool { return candidateNumeric }

// Rows implements vschema.Table: every table read through the proxy, most
// read first. Should the backend not answer, one row says why.
func (t Candidates) Rows() [][]any {
	cs, err := t.p.candidates(nil)
	if err != nil {
		t.p.log.Warn("digest: the advisor could not read the backend's catalog", "err", err)
		row := make([]any, len(candidateColumns))
		row[len(row)-1] = "the backend's catalog could not be read: " + err.Error()
		return [][]any{row}
	}
	rows := make([][]any, len(cs))
	for i, c := range cs {
		rows[i] = c.row()
	}
	return rows
}

func (c *candidate) row() []any {
	return []any{c.id.Schema, c.id.Table, c.rows, c.dataBytes, c.indexByte, c.memBytes,
		rate(c.readsPerSec), rate(c.proxyWritesPerSec), rate(c.bypassWritesPerSec),
		fmt.Sprintf("%.1f", c.share), rate(c.savedPerSec), fmt.Sprintf("%.3f", c.penaltyMsPerSec),
		c.verdict, c.reason}
}

func rate(v float64) string { return fmt.Sprintf("%.2f", v) }

// explainTop is how many digests EXPLAIN CACHE lists of each kind.
const explainTop = 5

// explainCache answers EXPLAIN CACHE t: the table's row of
// cache_candidates as (item, value) pairs, then its most counted digests
// that would and would not be answered from memory, and why.
func (p *Plugin) explainCache(st *plugins.Statement, name string) plugins.Action {
	id, ok := parseTableName(name, st.DB)
	switch {
	case !ok:
		return plugins.RefuseWith(mysql.NewError(mysql.ER_PARSE_ERROR,
			fmt.Sprintf("You have an error in your SQL syntax; EXPLAIN CACHE takes one table name, near '%s'", name)))
	case id.Schema == "":
		return plugins.RefuseWith(mysql.NewError(mysql.ER_NO_DB_ERROR, "No database selected"))
	}
	return plugins.AnswerWith(plugins.ResponderFunc(func(w plugins.ResponseWriter) error {
		cs, err := p.candidates(&id)
		if err != nil {
			return w.WriteError(mysql.NewError(mysql.ER_UNKNOWN_ERROR, "tableproxy advisor: "+err.Error()))
		}
		if len(cs) == 0 || !cs[0].found {
			return w.WriteError(mysql.NewError(mysql.ER_NO_SUCH_TABLE, fmt.Sprintf("Table '%s.%s' doesn't exist", id.Schema, id.Table)))
		}
		c := cs[0]
		var rows [][]any
		for i, v := range c.row() {
			rows = append(rows, []any{candidateColumns[i], fmt.Sprint(v), ""})
		}
		served, passed := 0, 0
		for _, d := range c.digests { // most counted first
			item := "served"
			detail := fmt.Sprintf("%d reads", d.count)
			if d.why.Declined() {
				if passed == explainTop {
					continue
				}
				passed++
				item = "not served"
				detail += ": " + d.why.Reason.String() + " (" + d.why.Text + ")"
			} else {
				if served == explainTop {
					continue
				}
				served++
			}
			rows = append(rows, []any{item, d.text, detail})
		}
		rs, err := plugins.TextResultset([]string{"item", "value", "detail"}, rows)
		if err != nil {
			return w.WriteError(mysql.NewError(mysql.ER_UNKNOWN_ERROR, "tableproxy advisor: "+err.Error()))
		}
		w.Rows(uint64(len(rows)))
		return w.WriteResult(&mysql.Result{Resultset: rs})
	}))
}
