package ddloffload

import (
	"context"
	"fmt"
	"strings"

	"tableproxy/internal/mysqlwire"
)

// createShadow creates the shadow (see shadowNames) with the table's final
// schema, then drops its secondary B-tree indexes again until the build
// stage:
//
//   - Rows go in in key order, so a key-only shadow takes them at the speed
//     of appending to one B-tree; secondary indexes filled row by row take
//     random inserts (measured on 2M rows: 7.8 s into a key-only shadow plus
//     5.9 s for the backend's sorted build, against 27.3 s with the indexes
//     in place).
//   - Unique indexes, old and new, would raise false duplicates: chunks
//     are read at different moments, so a value that moved from one row to
//     another between two chunk reads can be copied twice. After catch-up
//     the shadow holds the table as of one binary-log position, so the
//     backend's own build reports exactly the duplicates the table has.
//
// Where replicas are watched (tableproxy_ddl_max_replica_lag and
// replicas set), the non-unique indexes stay on the shadow through the
// copy: a deferred build is one ALTER, and a replica applies it only after
// the primary has finished it, holding all replication meanwhile (its lag
// grows by the build's whole duration, 4.1 s for two indexes on 1M rows
// here). Row by row, the copy's inserts reach the replica as row events
// the throttle paces against its lag. Unique indexes stay deferred even
// then, for the false duplicates above; their build is logged as the one
// step a replica applies after the primary.
//
// Adding the indexes to the empty shadow first makes the backend check
// their definitions (prefix lengths, key length, types) at once, with its
// own errors, and gives the exact final definitions to build later, in the
// table's own order. FULLTEXT and SPATIAL indexes stay: they are never
// unique.
func (r *runner) createShadow(ctx context.Context) error {
	if r.cp.started() {
		r.deferred = r.cp.Deferred // the resumed job's shadow, as it left it
		return nil
	}
	if err := r.p.jobs.update(r.rec, func(j *Job) { j.Shadow, j.Old = r.shadow, r.old }); err != nil {
		return err
	}
	shadow := mysqlwire.QuoteTable(r.t.Schema, r.shadow)
	if _, err := r.conn.Execute(r.mark + "CREATE TABLE " + shadow + " LIKE " + r.t.name()); err != nil {
		return err
	}
	r.created = true
	if err := r.stall(ctx, StageShadow); err != nil {
		return err
	}
	clauses := make([]string, len(r.req.Indexes))
	for i, ix := range r.req.Indexes {
		clauses[i] = ix.clause()
	}
	if _, err := r.conn.Execute(r.mark + "ALTER TABLE " + shadow + " " + strings.Join(clauses, ", ")); err != nil {
		return err
	}
	res, err := r.conn.Execute("SHOW CREATE TABLE " + shadow)
	if err != nil {
		return err
	}
	ddl, _ := res.GetString(0, 1)
	keepNonUnique := r.p.watchesReplicas()
	var drops []string
	for _, line := range strings.Split(ddl, "\n") {
		line = strings.TrimSuffix(strings.TrimSpace(line), ",")
		name, ok := secondaryKeyName(line)
		if !ok || strings.EqualFold(name, r.t.KeyName) || keepNonUnique && !strings.HasPrefix(line, "UNIQUE ") {
			continue
		}
		r.deferred = append(r.deferred, "ADD "+line)
		drops = append(drops, "DROP INDEX "+mysqlwire.QuoteIdent(name))
	}
	if len(drops) > 0 {
		if _, err := r.conn.Execute(r.mark + "ALTER TABLE " + shadow + " " + strings.Join(drops, ", ")); err != nil {
			return fmt.Errorf("defer the shadow's secondary indexes: %w", err)
		}
	}
	r.cp.Deferred, r.cp.KeyName = r.deferred, r.t.KeyName
	r.log.Info("ddl: shadow created", "shadow", r.shadow, "deferred_indexes", len(r.deferred), "replicas_watched", keepNonUnique)
	if keepNonUnique && len(r.deferred) > 0 {
		r.log.Warn("ddl: the unique indexes are built after the copy, in one ALTER the replicas apply only after the primary: expect their lag to grow by its duration", "indexes", len(r.deferred))
	}
	return nil
}

// secondaryKeyName reads a SHOW CREATE TABLE line that defines a B-tree
// secondary index ("KEY `k` (...)" or "UNIQUE KEY `k` (...)") and returns
// the index's name.
func secondaryKeyName(line string) (string, bool) {
	rest, ok := strings.CutPrefix(line, "UNIQUE KEY ")
	if !ok {
		if rest, ok = strings.CutPrefix(line, "KEY "); !ok {
			return "", false
		}
	}
	if !strings.HasPrefix(rest, "`") {
		return "", false
	}
	var b strings.Builder
	for i := 1; i < len(rest); i++ {
		if rest[i] == '`' {
			if i+1 < len(rest) && rest[i+1] == '`' {
				b.WriteByte('`')
				i++
				continue
			}
			return b.String(), true
		}
		b.WriteByte(rest[i])
	}
	return "", false
}

// buildIndexes adds the deferred indexes to the shadow in one ALTER, which
// the backend runs as a sorted build. Nothing writes to the shadow
// meanwhile: changes to the table keep collecting as dirty keys. A
// duplicate for a UNIQUE index fails it with the backend's own error 1062,
// naming the value and the index, before anything is swapped.
//
// The build starts from an exact image: the table is briefly read-locked
// while the last dirty keys are applied, so a duplicate it reports is one
// the table held at that moment, not an artefact of the copy.
func (r *runner) buildIndexes(ctx context.Context) error {
	if len(r.deferred) == 0 {
		return nil
	}
	if built, err := r.indexesBuilt(); err != nil || built {
		return err // a resumed job whose build had finished
	}
	if err := r.syncFrozen(ctx, lockAttempts, r.lockWait(), streamWait, nil); err != nil {
		return err
	}
	if err := r.stall(ctx, StageBuild); err != nil {
		return err
	}
	if err := r.setBuildKnobs(); err != nil {
		// Only tuning: the build runs with the backend's defaults.
		r.log.Warn("ddl: index build: could not set its session settings", "err", err)
	}
	_, err := r.conn.Execute(r.mark + "ALTER TABLE " + mysqlwire.QuoteTable(r.t.Schema, r.shadow) + " " + strings.Join(r.deferred, ", "))
	return err
}

// The session variables that size the backend's sorted index build, where
// it has them: MySQL 8.0.27 and later build with innodb_ddl_threads
// threads sharing innodb_ddl_buffer_size of sort memory, and read the
// table with innodb_parallel_read_threads. MariaDB has none of them (it
// builds with one thread and its global innodb_sort_buffer_size), so
// which to set is decided by asking the backend which it has.
var buildVars = []string{"innodb_ddl_threads", "innodb_ddl_buffer_size", "innodb_parallel_read_threads"}

// setBuildKnobs gives the build on the job's connection the job's workers
// and sort memory, as far as the backend lets a session.
func (r *runner) setBuildKnobs() error {
	res, err := r.conn.Execute("SHOW SESSION VARIABLES WHERE Variable_name IN ('" + strings.Join(buildVars, "', '") + "')")
	if err != nil {
		return err
	}
	has := map[string]bool{}
	for i := range res.RowNumber() {
		name, _ := res.GetString(i, 0)
		has[strings.ToLower(name)] = true
	}
	set := buildKnobs(has, r.set)
	if set == "" {
		r.log.Info("ddl: index build: the backend has no session settings for it (one thread, its global sort buffer)")
		return nil
	}
	r.log.Info("ddl: index build", "settings", set)
	_, err = r.conn.Execute("SET SESSION " + set)
	return err
}

// buildKnobs is the SET SESSION list for the build variables the backend
// has: as many build and read threads as the job has workers, and the
// job's sort memory for the build's buffers, each within its variable's
// range.
func buildKnobs(has map[string]bool, s Settings) string {
	var set []string
	if has["innodb_ddl_threads"] {
		set = append(set, fmt.Sprintf("innodb_ddl_threads = %d", min(max(s.Workers, 1), 64)))
	}
	if has["innodb_ddl_buffer_size"] {
		set = append(set, fmt.Sprintf("innodb_ddl_buffer_size = %d", min(max(s.SortMemory, 65536), 1<<32-1)))
	}
	if has["innodb_parallel_read_threads"] {
		set = append(set, fmt.Sprintf("innodb_parallel_read_threads = %d", min(max(s.Workers, 1), 256)))
	}
	return strings.Join(set, ", ")
}

// indexesBuilt reports whether the shadow has its deferred indexes: one
// ALTER adds them all or none.
func (r *runner) indexesBuilt() (bool, error) {
	res, err := r.conn.Execute("SHOW CREATE TABLE " + mysqlwire.QuoteTable(r.t.Schema, r.shadow))
	if err != nil {
		return false, err
	}
	ddl, _ := res.GetString(0, 1)
	have := map[string]bool{}
	for _, line := range strings.Split(ddl, "\n") {
		if name, ok := secondaryKeyName(strings.TrimSpace(line)); ok {
			have[name] = true
		}
	}
	for _, d := range r.deferred {
		name, _ := secondaryKeyName(strings.TrimPrefix(d, "ADD "))
		if !have[name] {
			return false, nil
		}
	}
	return true, nil
}
