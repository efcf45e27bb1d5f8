// Package results is the result cache: the store of the backend's own
// answers, replayed packet for packet (Cache, Entry), which statements
// may be answered from it (ShapeOf, TimeSafe), and what a key holds of a
// session and a statement (Session, AppendKeyField, AppendParamsKey).
// Package cache decides when to look an answer up, records the backend's
// answers and guards them with the tables' versions.
//
// The result cache answers read-only statements over cached tables that
// the evaluator does not cover (functions, joins, GROUP BY, ...) with the
// backend's own earlier answer to the same statement, replayed packet by
// packet. An answer is stored under a key that holds everything it
// depends on: the statement (exact text, or prepared text and parameter
// bytes), protocol and metadata flavour, user, current database, the
// session settings that change results, and the version of every table
// the statement reads. Versions only go up, and every write bumps them, so
// an entry stops matching the moment any of its tables is written; it is
// never deleted, only evicted (ristretto, cost = bytes held).
//
// What can go wrong, and what stops it:
//   - an answer computed while a table was being written: the versions in
//     the key are read before the statement is sent, with no write intent
//     open; a hit needs every table servable (no intent open) at exactly
//     those versions, and every write that ends bumps them, so a hit can
//     only happen while every write that ever began on those tables had
//     ended before the versions were read, all of which the backend's
//     answer saw. On top of that, an answer is stored only if the tables
//     are still servable at the same versions once it has arrived (an
//     intent open then makes a table unservable; one opened and closed
//     meanwhile bumped the version): an answer that can never be served is
//     not kept, and the rule holds without relying on the argument above;
//   - an answer that depends on something outside the key (the clock,
//     RAND, the connection, variables, stored functions, locking reads):
//     such statements are not eligible, by an allowlist of syntax and
//     builtin functions, so anything unknown goes to the backend;
//   - an answer read inside a transaction reflects its read view, not the
//     table's version: answers are stored only from statements run outside
//     a transaction, under an isolation level that reads committed data;
//   - a table cached again after NOCACHE: its version did not move while it
//     was not cached, so the key also holds the cached table's generation,
//     new each time it is cached;
//   - the parser reading a statement otherwise than MariaDB does (a
//     /*M! */ comment, ANSI_QUOTES, NO_BACKSLASH_ESCAPES): not eligible;
//   - a TIME value meeting a date takes the current date: a statement that
//     could make a TIME column do so is not eligible (TimeSafe);
//   - a hash collision: the full key is kept in the entry and compared.
//
// Writes that bypass the proxy are seen through the binary log, as for
// the evaluator: an answer may be served until the log shows the write.
// Rows of a statement without a total ORDER BY come in the order the
// backend's plan produced when the answer was stored.
//
// Imports: ristretto (the store), the SQL parser's syntax tree, go-mysql,
// lease (table names), plugins (the statement, the recorded response and
// the response writer), internal/mysqlwire and cache/eval (a snapshot's
// columns, for TimeSafe); never package cache.
package results
