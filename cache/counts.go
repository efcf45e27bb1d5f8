package cache

import (
	"strconv"

	"tableproxy/plugins"
)

// The backend keeps, per session, what FOUND_ROWS() and ROW_COUNT()
// return: the number of rows of the last SELECT, and -1 after a SELECT.
// A SELECT the proxy answers never reaches the backend, which would still
// report the statement before it. So the proxy owes the backend that
// SELECT's row count, and pays it before a statement that asks for either
// goes there: it runs a SELECT of as many rows on the session's
// connection, after which both read as they would have.

// owedCounts is what a session's backend has not seen.
type owedCounts struct {
	owed bool
	rows uint64 // the rows of the last SELECT the proxy answered
}

// mentionsCounts reports whether sql may read FOUND_ROWS() or
// ROW_COUNT().
func mentionsCounts(sql string) bool {
	return plugins.ContainsFold(sql, "FOUND_ROWS") || plugins.ContainsFold(sql, "ROW_COUNT")
}

// rowsQuery returns a SELECT that returns n rows, on MariaDB and MySQL 8
// alike (a recursive CTE of at most 1000 rows: MySQL's default
// cte_max_recursion_depth). Past 100,000 rows, which the connection would
// have to read, it counts them with SQL_CALC_FOUND_ROWS instead (MySQL 8
// warns that this is deprecated).
func rowsQuery(n uint64) string {
	const thousand = "WITH RECURSIVE tp_rows(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM tp_rows WHERE n < 999) "
	num := strconv.FormatUint(n, 10)
	switch {
	case n == 0:
		return "SELECT 1 FROM DUAL WHERE 0"
	case n <= 1000:
		return "WITH RECURSIVE tp_rows(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM tp_rows WHERE n < " + num + ") SELECT n FROM tp_rows"
	case n <= 100000:
		return thousand + "SELECT 1 FROM tp_rows a, tp_rows b WHERE a.n * 1000 + b.n < " + num
	default:
		return thousand + "SELECT SQL_CALC_FOUND_ROWS 1 FROM tp_rows a, tp_rows b, tp_rows c " +
			"WHERE a.n <= " + strconv.FormatUint(n/1000000, 10) + " AND a.n * 1000000 + b.n * 1000 + c.n < " + num + " LIMIT 0"
	}
}

// payCounts brings the backend's FOUND_ROWS() and ROW_COUNT() up to date
// before st, which reads one of them, goes there.
func payCounts(st *plugins.Statement, si *sessionInfo) {
	if !si.counts.owed || st.Backend == nil || !mentionsCounts(st.SQL) {
		return
	}
	si.counts.owed = false
	if r, err := st.Backend.Query(rowsQuery(si.counts.rows)); err == nil {
		r.Close()
	}
}

// answeredBy records who answered st: a SELECT the proxy answered leaves
// its row count owed; anything the backend ran settles it.
func (c *owedCounts) answeredBy(st *plugins.Statement, out *plugins.Outcome) {
	switch {
	case out.Source == plugins.FromBackend:
		c.owed = false
	case out.Err == nil && st.Kind == plugins.KindSelect:
		c.owed, c.rows = true, out.Rows
	}
}
