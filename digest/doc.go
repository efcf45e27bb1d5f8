// Package digest owns the query digests and the cache advisor: every
// statement the proxy sees is counted under its digest (TiDB's
// normalization, literals as '?') per database and user, with its
// latencies, rows, errors and where it was answered (the evaluator, the
// result cache or the backend, and the cache's typed reason for a
// pass-through); from those digests the advisor says, for every table read
// through the proxy, whether to cache it: its size, its reads and writes
// (through the proxy and, from the binary log, bypassing it), and the
// share of its reads the evaluator would answer, found by planning each
// digest with the cache's own planner against the table's definition.
// They are shown as tableproxy.query_digests, tableproxy.cache_candidates
// and EXPLAIN CACHE t; ADMIN RESET QUERY DIGESTS starts afresh.
//
// What can go wrong: the observer runs on every statement, so counting
// one must cost a map lookup under a lock and no allocation (a digest
// seen for the first time is parsed once, outside the lock); memory is
// bounded by keeping the top N digests by count and an LRU of the
// others, so a flood of distinct statements churns the LRU, never the
// heap. The advisor's prediction is the planner's: what is decided on a
// statement's data or session (ties in an ORDER BY, a transaction) is
// not foreseen, so the share served once cached can be a little lower.
package digest
