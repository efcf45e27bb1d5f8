// Package eval is the evaluator of cached reads: it plans a SELECT over
// tables held in memory (Snapshot) and computes its answer exactly as the
// backend would, or says why it cannot (Why, with a PassReason). Planning
// (plan.go), running a plan: conditions, integer ranges and indexes, string
// comparison by collation and string indexes, ORDER BY, LIMIT, DISTINCT,
// aggregates and GROUP BY (exec.go, index.go, strexpr.go, strindex.go,
// arith.go), joins of two tables (join.go), statement templates
// (template.go), the collations learned from the backend (collation.go), a
// snapshot's in-memory form and indexes (snapshot.go), TIMESTAMP shifts
// (timezone.go), and the reasons a statement is left to the backend
// (reason.go).
//
// Its tests need no backend: testdata/cases holds statements with
// MariaDB's answers, run on snapshots built in memory (and checked against
// a real MariaDB when one is configured).
//
// Imports: the SQL parser's syntax tree, go-mysql (column definitions, and
// the connection a collation learns its weights on), lease (table names
// and versions), plugins (TableOf: the proxy's one rule for naming a table)
// and internal/mysqlwire. Never package cache, which decides per statement
// whether to use it, loads the snapshots and answers the client.
package eval
