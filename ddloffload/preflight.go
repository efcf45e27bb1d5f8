package ddloffload

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// preflight checks, in a stable order so the same bad statement always gets
// the same error, everything that would make the job fail later or change
// the table's meaning: the table exists and has a key to walk, the indexes
// are new and their columns exist (the errors MySQL gives), nothing the
// swap would lose is attached to the table (triggers, foreign keys), it is
// not cached, and the binary log shows every row change with full images.
func (r *runner) preflight(ctx context.Context) error {
	var err error
	if r.conn, err = r.connect(ctx); err != nil {
		return err
	}
	r.connID.Store(r.conn.GetConnectionID())
	// The control connection applies dirty keys while writers run: it waits
	// a second at most for a row an application holds, and retries the key
	// on a later pass rather than wait on a long transaction. (Not the copy
	// workers: with innodb_autoinc_lock_mode=1, the default, each INSERT
	// ... SELECT into a table with an AUTO_INCREMENT column holds the
	// table's AUTO-INC lock to its end, so the workers' inserts queue for
	// one another.)
	if _, err := r.conn.Execute("SET SESSION innodb_lock_wait_timeout = 1"); err != nil {
		return err
	}
	t, err := loadTable(r.conn, r.req.Schema, r.req.Table)
	if err != nil {
		return err
	}
	r.t = t
	for _, check := range []func() error{r.checkIndexes, r.checkKey, r.checkAttached, r.checkBinlog, r.checkNames, r.checkTempRoom, r.checkReplicas} {
		if err := check(); err != nil {
			return err
		}
	}
	if err := r.p.jobs.update(r.rec, func(j *Job) {
		if !r.cp.started() || j.RowsEstimate == 0 {
			j.RowsEstimate = t.RowsEstimate // a resumed job keeps the rows its copy counted
		}
	}); err != nil {
		return err
	}
	return r.stall(ctx, StagePreflight)
}

// checkIndexes names unnamed indexes as MySQL does (after the first
// column, with _2, _3 ... when taken) and gives MySQL's errors for a name in
// use (1061) and for a column that does not exist (1072).
func (r *runner) checkIndexes() error {
	if len(r.cp.IndexNames) == len(r.req.Indexes) {
		for i := range r.req.Indexes {
			r.req.Indexes[i].Name = r.cp.IndexNames[i]
		}
	}
	defer func() {
		r.cp.IndexNames = r.cp.IndexNames[:0]
		for _, ix := range r.req.Indexes {
			r.cp.IndexNames = append(r.cp.IndexNames, ix.Name)
		}
	}()
	taken := func(name string, upto int) bool {
		if r.t.hasIndex(name) {
			return true
		}
		for _, ix := range r.req.Indexes[:upto] {
			if strings.EqualFold(ix.Name, name) {
				return true
			}
		}
		return false
	}
	for i := range r.req.Indexes {
		ix := &r.req.Indexes[i]
		for _, part := range ix.Parts {
			if r.t.column(part.Column) == nil {
				return errKeyColumn(part.Column)
			}
		}
		if ix.Name == "" {
			base := r.t.column(ix.Parts[0].Column).Name
			ix.Name = base
			for n := 2; taken(ix.Name, i) || strings.EqualFold(ix.Name, "PRIMARY"); n++ {
				ix.Name = fmt.Sprintf("%s_%d", base, n)
			}
			continue
		}
		if strings.EqualFold(ix.Name, "PRIMARY") {
			return errWrongIndexName(ix.Name)
		}
		if taken(ix.Name, i) {
			return errDupKeyName(ix.Name)
		}
	}
	return nil
}

// checkKey finds the key the job walks the table by.
func (r *runner) checkKey() error {
	if !r.t.chooseKey() {
		return cannotSwap(fmt.Sprintf("%s has no primary key or NOT NULL unique key to copy it by", r.t.name()), func(string) *mysql.MyError { return errNoKey(r.t.Schema, r.t.Table) })
	}
	for _, c := range r.t.Key {
		if !keyTypeSupported(c.DataType) {
			return cannotSwap(fmt.Sprintf("key column %s of type %s cannot be walked in order", c.Name, c.DataType), errUnsupported)
		}
	}
	return nil
}

// checkReplicas refuses a job that is to watch the primary's replicas
// (a user:password@discover entry in replicas, max_replica_lag set) when
// the primary will not list them to the job's user: the throttle would
// hold the copy for good.
func (r *runner) checkReplicas() error {
	if r.p.vars.globalInt(varPrefix+"max_replica_lag") <= 0 || !slices.ContainsFunc(r.p.opts.Replicas, func(e string) bool {
		rep, err := parseReplica(e)
		return err == nil && rep.addr == discoverHost
	}) {
		return nil
	}
	addrs, err := discoverReplicas(r.conn)
	if err != nil {
		return errJob("cannot list the backend's replicas to watch their lag (replicas: ...@discover): %v. The job's user needs REPLICATION MASTER ADMIN on MariaDB 10.5 and later (REPLICATION SLAVE before, and on MySQL), or list the replicas in the replicas option", err)
	}
	r.log.Info("ddl: replicas to watch", "discovered", addrs)
	return nil
}

// checkAttached refuses tables with triggers or foreign keys: CREATE TABLE
// ... LIKE copies neither, and RENAME would take the triggers along to the
// old table and leave other tables' foreign keys pointing at it.
func (r *runner) checkAttached() error {
	res, err := r.conn.Execute(`SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = ? AND EVENT_OBJECT_TABLE = ?`, r.t.Schema, r.t.Table)
	if err != nil {
		return err
	}
	if n, _ := res.GetInt(0, 0); n > 0 {
		return cannotSwap(fmt.Sprintf("%s has triggers, which the swap would not carry over", r.t.name()), errUnsupported)
	}
	res, err = r.conn.Execute(`SELECT COUNT(*) FROM information_schema.REFERENTIAL_CONSTRAINTS
		WHERE (CONSTRAINT_SCHEMA = ? AND TABLE_NAME = ?) OR (UNIQUE_CONSTRAINT_SCHEMA = ? AND REFERENCED_TABLE_NAME = ?)`,
		r.t.Schema, r.t.Table, r.t.Schema, r.t.Table)
	if err != nil {
		return err
	}
	if n, _ := res.GetInt(0, 0); n > 0 {
		return cannotSwap(fmt.Sprintf("%s has or is referenced by foreign keys, which the swap would not carry over", r.t.name()), errUnsupported)
	}
	return nil
}

// checkBinlog requires a binary log in ROW format with full row images:
// the job learns of every change to the table from it.
func (r *runner) checkBinlog() error {
	res, err := r.conn.Execute("SELECT @@log_bin, @@binlog_format, @@binlog_row_image")
	if err != nil {
		return err
	}
	logBin, _ := res.GetInt(0, 0)
	format, _ := res.GetString(0, 1)
	image, _ := res.GetString(0, 2)
	var why string
	switch {
	case logBin != 1:
		why = "the backend's binary log is off (log_bin=OFF)"
	case format != "ROW":
		why = "the backend's binary log is not in ROW format (binlog_format=" + format + ")"
	case image != "FULL":
		why = "the backend's binary log lacks full row images (binlog_row_image=" + image + ")"
	default:
		return nil
	}
	return cannotSwap(why, func(msg string) *mysql.MyError {
		return mysql.NewError(mysql.ER_OPTION_PREVENTS_STATEMENT, "tableproxy cannot copy the table online: "+msg)
	})
}

// checkNames picks the shadow's and the old table's names and requires
// that neither exists (another tool's table, or a user's). A resumed job
// past its stream's start needs its own shadow instead (under the names it
// recorded), and the same walk key as before.
func (r *runner) checkNames() error {
	r.rec.mu.Lock()
	j := r.rec.job
	r.rec.mu.Unlock()
	var ok bool
	r.shadow, r.old, ok = shadowNames(r.t.Table, j.ID, j.Start)
	if r.cp.started() && j.Shadow != "" {
		r.shadow, r.old, ok = j.Shadow, j.Old, true
	}
	if !ok {
		return errNameTooLong(r.t.Table)
	}
	for _, name := range []string{r.shadow, r.old} {
		res, err := r.conn.Execute(`SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, r.t.Schema, name)
		if err != nil {
			return err
		}
		n, _ := res.GetInt(0, 0)
		switch {
		case name == r.shadow && r.cp.started():
			if n == 0 {
				return errJob("cannot resume: the job's shadow table %s is gone", name)
			}
			if r.cp.KeyName != r.t.KeyName {
				return errJob("cannot resume: the table's walk key changed from %s to %s", r.cp.KeyName, r.t.KeyName)
			}
			r.created = true
		case n > 0:
			return mysql.NewError(mysql.ER_TABLE_EXISTS_ERROR, fmt.Sprintf("Table '%s' already exists", name))
		}
	}
	return nil
}

// shadowNames returns the names of a job's shadow and of the original
// once swapped out (the kept table), unique to the job so that any number
// of jobs on one table can follow one another while earlier ones' originals
// are kept: <table>__new_<job>_<start> and <table>__old_<job>_<start>, the
// start in UTC as YYYYMMDDhhmmss (two proxies' jobs with one number differ
// in it), or, where that exceeds the 64 characters of an identifier,
// <table>__n<job> and <table>__o<job>. ok is false when even those are
// too long.
//
// Both extend the table's own name, so they sort after it: MariaDB and
// MySQL lock the tables of a RENAME in the byte order of their names, and
// the cut-over's RENAME must queue for the table before anything else
// (see swap).
func shadowNames(table string, job int64, start time.Time) (shadow, old string, ok bool) {
	tag := fmt.Sprintf("_%d_%s", job, start.UTC().Format("20060102150405"))
	shadow, old = table+"__new"+tag, table+"__old"+tag
	if fitsIdentifier(old) && fitsIdentifier(shadow) {
		return shadow, old, true
	}
	shadow, old = fmt.Sprintf("%s__n%d", table, job), fmt.Sprintf("%s__o%d", table, job)
	return shadow, old, fitsIdentifier(old) && fitsIdentifier(shadow)
}

// fitsIdentifier reports whether name fits a table name (64 characters).
func fitsIdentifier(name string) bool { return utf8.RuneCountInString(name) <= 64 }
