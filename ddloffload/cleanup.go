package ddloffload

import (
	"context"
	"fmt"
	"hash/crc32"
	"slices"
	"time"

	"tableproxy/internal/mysqlwire"
)

// cleanup drops the old table, or records when it is due: it is kept for
// OldTableRetention so a bad index can be backed out by renaming it back.
// The swap is done by now, so a failure here does not fail the job: the
// janitor retries the drop.
func (r *runner) cleanup(ctx context.Context) error {
	_ = r.stall(ctx, StageCleanup)
	retention := time.Duration(*r.p.opts.OldTableRetention)
	if retention == 0 {
		_, err := r.conn.Execute("DROP TABLE IF EXISTS " + mysqlwire.QuoteTable(r.t.Schema, r.old))
		if err == nil {
			return nil
		}
		r.log.Warn("ddl: cannot drop the old table; the janitor will retry", "table", r.old, "err", err)
	}
	schema, name := r.keepAside()
	r.analyzeKept(schema, name)
	due := time.Now().Add(retention)
	if err := r.p.jobs.update(r.rec, func(j *Job) { j.DropOldAt, j.KeptSchema, j.KeptName = due, schema, name }); err != nil {
		r.log.Warn("ddl: cannot record when to drop the old table", "table", r.old, "err", err)
	}
	r.p.wakeJanitor()
	return nil
}

// keepAside moves the kept original out of the application's schema, to
// kept_tables_schema, where SHOW TABLES, an ORM's introspection and a
// dump of the schema do not see it, and returns where it went ("" when it
// stays beside the table: the option is "-", or the backend refused the
// move, as it does without CREATE on that schema or for a table with
// triggers; logged).
func (r *runner) keepAside() (schema, name string) {
	to := r.p.opts.KeptTablesSchema
	if to == "-" || to == r.t.Schema {
		return "", ""
	}
	name = keptName(r.t.Schema, r.old)
	_, err := r.conn.Execute("CREATE DATABASE IF NOT EXISTS " + mysqlwire.QuoteIdent(to))
	if err == nil {
		_, err = r.conn.Execute("RENAME TABLE " + mysqlwire.QuoteTable(r.t.Schema, r.old) + " TO " + mysqlwire.QuoteTable(to, name))
	}
	if err != nil {
		r.log.Info("ddl: the kept original stays beside the table: it could not be moved to kept_tables_schema",
			"table", r.t.Schema+"."+r.old, "kept_tables_schema", to, "err", err)
		return "", ""
	}
	r.log.Info("ddl: the original is kept out of the application's schema", "table", r.t.Schema+"."+r.t.Table, "kept", to+"."+name)
	return to, name
}

// analyzeKept has the backend count the kept original's size afresh:
// InnoDB's figures for a table just filled (the seed of a test, a bulk
// load) can lag far behind, and kept_tables_max_bytes is held by them.
func (r *runner) analyzeKept(schema, name string) {
	if schema == "" {
		schema, name = r.t.Schema, r.old
	}
	if _, err := r.conn.Execute("ANALYZE NO_WRITE_TO_BINLOG TABLE " + mysqlwire.QuoteTable(schema, name)); err != nil {
		r.log.Debug("ddl: could not analyze the kept original; its size may be counted low", "table", schema+"."+name, "err", err)
	}
}

// keptName is the kept original's name in kept_tables_schema: its schema
// and name, which no other job's share (its name holds the job's id and
// time), within MariaDB's 64 characters.
func keptName(schema, old string) string {
	name := schema + "__" + old
	if len(name) <= 64 {
		return name
	}
	sum := fmt.Sprintf("%08x", crc32.ChecksumIEEE([]byte(name)))
	return name[:64-len(sum)-1] + "_" + sum
}

// janitor drops kept originals when their retention ends: at start (a
// proxy that was down when one was due drops it as soon as it is back,
// from the jobs file), when one is due, and every janitorEvery to retry
// a drop that failed. Only the proxy that ran a job knows it, so exactly
// one proxy drops each kept table, in a cluster as alone.
func (p *Plugin) janitor() {
	defer p.wg.Done()
	for {
		next := p.dropDueOldTables(time.Now())
		wait := janitorEvery
		if !next.IsZero() {
			wait = min(wait, max(0, time.Until(next)))
		}
		t := time.NewTimer(wait)
		select {
		case <-p.ctx.Done():
			t.Stop()
			return
		case <-p.janitorWake:
		case <-t.C:
		}
		t.Stop()
	}
}

// janitorEvery is how often the janitor looks at the jobs when none is
// due sooner.
const janitorEvery = 30 * time.Second

// wakeJanitor makes the janitor look at the jobs again (a kept table's
// drop time was just set).
func (p *Plugin) wakeJanitor() {
	select {
	case p.janitorWake <- struct{}{}:
	default:
	}
}

// dropDueOldTables drops the kept tables due by now, and returns when the
// next one is due (zero if none is kept). A job still running keeps its
// original until it ends.
func (p *Plugin) dropDueOldTables(now time.Time) (next time.Time) {
	for _, rec := range p.jobs.records() {
		j := rec.snapshot()
		if j.KeptTable() == "" || j.State == StateRunning {
			continue
		}
		if j.DropOldAt.After(now) {
			if next.IsZero() || j.DropOldAt.Before(next) {
				next = j.DropOldAt
			}
			continue
		}
		if err := p.dropKept(rec); err != nil {
			p.log.Warn("ddl: cannot drop a kept original table; retrying later", "job", j.ID, "table", j.KeptTable(), "err", err)
		}
	}
	p.boundKeptTables()
	return next
}

// boundKeptTables drops the oldest kept originals, retention or not,
// while together they take more than kept_tables_max_bytes on the
// backend (data and indexes, as information_schema counts them).
func (p *Plugin) boundKeptTables() {
	limit := p.opts.keptMaxBytes
	if limit <= 0 {
		return
	}
	type kept struct {
		rec  *jobRec
		end  time.Time
		size int64
	}
	var all []kept
	var total int64
	for _, rec := range p.jobs.records() {
		j := rec.snapshot()
		if j.KeptTable() == "" || j.State == StateRunning {
			continue
		}
		size, err := p.keptSize(j)
		if err != nil {
			continue
		}
		all = append(all, kept{rec, j.End, size})
		total += size
	}
	slices.SortFunc(all, func(a, b kept) int { return a.end.Compare(b.end) })
	for _, k := range all {
		if total <= limit {
			return
		}
		j := k.rec.snapshot()
		if err := p.dropKept(k.rec); err != nil {
			p.log.Warn("ddl: cannot drop a kept original table; retrying later", "job", j.ID, "table", j.KeptTable(), "err", err)
			continue
		}
		total -= k.size
		p.log.Info("ddl: dropped the oldest kept original before its time: the kept tables passed kept_tables_max_bytes",
			"job", j.ID, "table", j.KeptTable(), "size", k.size, "kept_tables_max_bytes", limit)
	}
}

// keptSize is what job j's kept original takes on the backend.
func (p *Plugin) keptSize(j Job) (int64, error) {
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	c, err := p.backend.Connect(ctx, j.User, "")
	if err != nil {
		return 0, err
	}
	defer c.Close()
	schema, name := j.keptAt()
	res, err := c.Execute("SELECT IFNULL(DATA_LENGTH + INDEX_LENGTH, 0) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, name)
	if err != nil || res.RowNumber() == 0 {
		return 0, fmt.Errorf("kept table %s.%s not found: %v", schema, name, err)
	}
	return res.GetInt(0, 0)
}

// dropKept drops a job's kept original and records that it is gone.
func (p *Plugin) dropKept(rec *jobRec) error {
	j := rec.snapshot()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	c, err := p.backend.Connect(ctx, j.User, "")
	if err != nil {
		return err
	}
	defer c.Close()
	schema, name := j.keptAt()
	if _, err := c.Execute("DROP TABLE IF EXISTS " + mysqlwire.QuoteTable(schema, name)); err != nil {
		return err
	}
	p.log.Info("ddl: dropped a job's kept original table", "job", j.ID, "table", schema+"."+name)
	return p.jobs.update(rec, func(j *Job) { j.DropOldAt = time.Time{} })
}
