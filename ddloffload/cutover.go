package ddloffload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/internal/mysqlwire"
	"tableproxy/plugins"
)

// errConnect is a connection the job could not open; in the cut-over, the
// attempt is retried.
var errConnect = errors.New("cannot connect to the backend")

// errRetry marks a cut-over attempt that gave up within its bound and
// changed nothing; the next attempt may succeed.
type errRetry struct{ err error }

func (e errRetry) Error() string { return e.err.Error() }
func (e errRetry) Unwrap() error { return e.err }

// cutOver swaps the shadow in, once a postponed job is told to (see
// complete.go). Each attempt is bounded by CutOverHold; one that cannot
// finish in it releases everything, records who held it up (BLOCKED_BY in
// ADMIN SHOW DDL JOBS), and the next one tries again after a delay that
// doubles each time (cutOverBackoff) and another catch-up: a long
// transaction or a held metadata lock is waited out without the job
// holding anything meanwhile. The attempts' errors are reported joined.
func (r *runner) cutOver(ctx context.Context) error {
	if err := r.awaitCompletion(ctx); err != nil {
		return err
	}
	var errs []error
	for attempt := 1; attempt <= r.p.opts.CutOverAttempts; attempt++ {
		_ = r.p.jobs.update(r.rec, func(j *Job) { j.CutOverAttempt = attempt })
		if err := r.catchUp(ctx); err != nil {
			return err
		}
		err := r.swap(ctx)
		if err == nil {
			_ = r.p.jobs.update(r.rec, func(j *Job) { j.BlockedBy = "" })
			return nil
		}
		var retry errRetry
		if !errors.As(err, &retry) {
			return err
		}
		errs = append(errs, fmt.Errorf("attempt %d: %w", attempt, err))
		blockers := r.blockers()
		_ = r.p.jobs.update(r.rec, func(j *Job) { j.BlockedBy = describe(blockers) })
		if attempt == r.p.opts.CutOverAttempts {
			break
		}
		delay := cutOverBackoff(attempt)
		r.log.Warn("ddl: cut-over attempt abandoned; retrying", "attempt", attempt, "in", delay, "blocked_by", describe(blockers), "err", err)
		if k := r.p.opts.CutOverKillBlockers; k > 0 && attempt >= k {
			r.killBlockers(blockers)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
	return errJob("cut-over did not finish in %d attempts: %v", r.p.opts.CutOverAttempts, errors.Join(errs...))
}

// cutOverBackoff is the wait after failed attempt n: 0.5 s, doubling, at
// most maxCutOverBackoff. With the default 10 attempts the job keeps
// trying for about two and a half minutes.
func cutOverBackoff(n int) time.Duration {
	d := 500 * time.Millisecond << min(n-1, 10)
	return min(d, maxCutOverBackoff)
}

const maxCutOverBackoff = 30 * time.Second

// blocker is a session that may hold the cut-over up.
type blocker struct {
	id   int64
	what string // who it is, what it holds and runs
	// locks: it was seen holding a metadata lock on the table, not only
	// with a transaction open.
	locks bool
	// command and secs are its process-list row's COMMAND and TIME (""
	// when the job's user cannot see the row: another user's, without
	// PROCESS).
	command string
	secs    int64
}

// stuck reports whether b holds the table and is not merely passing
// through it: idle in an open transaction, or in its statement for at
// least hold. (A statement that writes the table holds a lock for the
// moment it runs; it is no blocker.)
func (b blocker) stuck(hold time.Duration) bool {
	return b.locks && b.id > 0 && (b.command == "Sleep" || b.command != "" && time.Duration(b.secs)*time.Second >= hold)
}

// describe is the BLOCKED_BY text of blockers.
func describe(bs []blocker) string {
	whats := make([]string, len(bs))
	for i, b := range bs {
		whats[i] = b.what
	}
	return strings.Join(whats, "; ")
}

// killBlockers kills the sessions that hold up the cut-over
// (cutover_kill_blockers), one log line each: those seen holding a
// metadata lock on the table while idle in a transaction or long in a
// statement (blocker.stuck). A session only seen with a transaction open
// may hold nothing of the table, and one whose process-list row the job's
// user cannot see cannot be judged: both are left be.
func (r *runner) killBlockers(bs []blocker) {
	killed := 0
	for _, b := range bs {
		if !b.stuck(time.Duration(r.p.opts.CutOverHold)) {
			continue
		}
		if _, err := r.conn.Execute(fmt.Sprintf("KILL %d", b.id)); err != nil {
			r.log.Warn("ddl: could not kill a session that holds up the cut-over", "connection", b.id, "blocker", b.what, "err", err)
			continue
		}
		killed++
		r.log.Warn("ddl: killed a session that held up the cut-over (cutover_kill_blockers)", "connection", b.id, "blocker", b.what)
	}
	if killed == 0 && len(bs) > 0 {
		r.log.Warn("ddl: cutover_kill_blockers: no session is known to hold the table while idle in a transaction or long in a statement, so none was killed "+
			"(MariaDB shows metadata locks with its metadata_lock_info plugin, INSTALL SONAME 'metadata_lock_info'; other users' sessions need PROCESS to be seen and CONNECTION ADMIN to be killed)",
			"blocked_by", describe(bs))
	}
}

// blockers names the sessions that may hold the cut-over up, with what
// they run: those holding a metadata lock on the table, where the backend
// shows them (MariaDB's METADATA_LOCK_INFO plugin, MySQL's
// performance_schema.metadata_locks); where it does not, those with a
// transaction open for more than a second (InnoDB does not say which
// tables a transaction holds). The job's own connections are left out.
func (r *runner) blockers() []blocker {
	c := r.conn
	if c == nil {
		return nil
	}
	const mine = "'/* tableproxy ddl job %'" // (jobMarker)
	queries := []string{
		// MariaDB, with the metadata_lock_info plugin.
		`SELECT m.THREAD_ID, IFNULL(p.USER, ''), IFNULL(p.TIME, 0), IFNULL(p.COMMAND, ''), CONCAT(m.LOCK_MODE, ' lock'), LEFT(IFNULL(p.INFO, ''), 100)
		   FROM information_schema.METADATA_LOCK_INFO m LEFT JOIN information_schema.PROCESSLIST p ON p.ID = m.THREAD_ID
		  WHERE m.TABLE_SCHEMA = ? AND m.TABLE_NAME = ? AND m.THREAD_ID <> CONNECTION_ID() AND IFNULL(p.INFO, '') NOT LIKE ` + mine,
		// MySQL 8.
		`SELECT t.PROCESSLIST_ID, IFNULL(t.PROCESSLIST_USER, ''), IFNULL(t.PROCESSLIST_TIME, 0), IFNULL(t.PROCESSLIST_COMMAND, ''), CONCAT(m.LOCK_TYPE, ' lock'), LEFT(IFNULL(t.PROCESSLIST_INFO, ''), 100)
		   FROM performance_schema.metadata_locks m JOIN performance_schema.threads t ON t.THREAD_ID = m.OWNER_THREAD_ID
		  WHERE m.OBJECT_TYPE = 'TABLE' AND m.OBJECT_SCHEMA = ? AND m.OBJECT_NAME = ? AND m.LOCK_STATUS = 'GRANTED'
		    AND t.PROCESSLIST_ID <> CONNECTION_ID() AND IFNULL(t.PROCESSLIST_INFO, '') NOT LIKE ` + mine,
	}
	for _, q := range queries {
		// A view the backend lacks errs; one it does not fill (MariaDB's
		// performance_schema off) is empty: the next one is asked.
		if res, err := c.Execute(q, r.t.Schema, r.t.Table); err == nil && res.RowNumber() > 0 {
			return describeSessions(res, true)
		}
	}
	res, err := c.Execute(`SELECT t.trx_mysql_thread_id, IFNULL(p.USER, ''), TIMESTAMPDIFF(SECOND, t.trx_started, NOW()), IFNULL(p.COMMAND, ''),
		'transaction open', LEFT(IFNULL(p.INFO, ''), 100)
		   FROM information_schema.INNODB_TRX t LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
		  WHERE t.trx_mysql_thread_id <> CONNECTION_ID() AND t.trx_started < NOW() - INTERVAL 1 SECOND AND IFNULL(p.INFO, '') NOT LIKE ` + mine)
	if lacksProcess(err) {
		return []blocker{{what: "not known: the job's user lacks the PROCESS privilege, which shows other sessions' transactions"}}
	}
	if err != nil {
		return nil
	}
	return describeSessions(res, false)
}

// describeSessions reads blockers' rows: id, user, seconds, command, what
// it holds, statement. locks: the rows are of metadata locks.
func describeSessions(res *mysql.Result, locks bool) []blocker {
	var out []blocker
	for i := range res.RowNumber() {
		id, _ := res.GetInt(i, 0)
		user, _ := res.GetString(i, 1)
		secs, _ := res.GetInt(i, 2)
		cmd, _ := res.GetString(i, 3)
		what, _ := res.GetString(i, 4)
		info, _ := res.GetString(i, 5)
		s := fmt.Sprintf("connection %d (%s, %s %d s): %s", id, user, cmd, secs, what)
		if info != "" {
			s += ": " + info
		}
		out = append(out, blocker{id: id, what: s, locks: locks, command: cmd, secs: secs})
	}
	return out
}

// blockedBy is the BLOCKED_BY column: who held up a running job's last
// cut-over attempt.
func (j Job) blockedBy() string {
	if j.State == StateDone || j.State == StateFailed || j.State == StateCancelled {
		return ""
	}
	return j.BlockedBy
}

// swap is one cut-over attempt:
//
//  1. Hold new statements on the table at the proxy (not those of a
//     transaction open before, which may hold locks the swap waits for),
//     and let the transactions open on the backend end (bounded by half
//     the cut-over's hold): one that read the table and wrote it after
//     the RENAME below queued would be failed by MariaDB's deadlock
//     detector.
//  2. The backstop for writers that bypass the proxy: connection L takes
//     LOCK TABLES t READ, which waits for open write transactions on t to
//     end (bounded by the cut-over's hold) and then keeps every writer out
//     while readers go on.
//  3. The last dirty keys are applied up to the binary log's current end:
//     the shadow now equals the table, and nothing can change the table.
//  4. Connection R sends RENAME TABLE t TO t__old, t__new TO t. MariaDB
//     refuses RENAME under LOCK TABLES, so it cannot run on L. R takes its
//     exclusive metadata locks one by one in name order, and t sorts
//     first (the other names extend it), so R queues for t behind L while
//     holding nothing. Once R is seen waiting, L unlocks, and the lock
//     queue grants R's pending exclusive lock before any waiting writer's
//     shared one; R then takes t__new and t__old (waiting, if it must,
//     for InnoDB's purge or statistics threads, which lock the shadow for
//     moments) while every writer of t waits behind it, and the writers
//     reach the new table. Were the shadow's name to sort before t, R
//     could be seen waiting for such a moment on the shadow, L would
//     unlock, and a writer would slip into the old table: lost.
//  5. Release the held statements; they now reach the new table.
//
// If R is not waiting in time, it is killed before L unlocks: nothing has
// changed, and the attempt is retried.
func (r *runner) swap(ctx context.Context) error {
	hold := time.Duration(r.p.opts.CutOverHold)
	deadline := time.Now().Add(hold)
	epoch, release := r.p.fence.hold(plugins.TableID{Schema: r.t.Schema, Table: r.t.Table})
	defer release()

	rn, err := r.connect(ctx)
	if err != nil {
		return errRetry{err}
	}
	defer rn.Close()
	if err := r.waitTransactions(ctx, epoch, time.Now().Add(hold/2)); err != nil {
		return err
	}
	var lockedAt time.Time
	err = r.syncFrozen(ctx, 1, hold, hold, func(unlock func()) error {
		lockedAt = time.Now()
		if err := r.carryAutoIncrement(); err != nil {
			return err
		}
		r.stream.setClosing(true)
		rename := r.mark + "RENAME TABLE " + r.t.name() + " TO " + mysqlwire.QuoteTable(r.t.Schema, r.old) + ", " +
			mysqlwire.QuoteTable(r.t.Schema, r.shadow) + " TO " + r.t.name()
		// A cached copy of the table stays exact through the swap: the
		// shadow now holds the same rows, and nothing can change them.
		unannounce := r.p.announceSwap(rename)
		renamed := make(chan error, 1)
		go func() {
			// (A backstop: awaitRename kills it sooner. Whole seconds.)
			_, err := rn.Execute(fmt.Sprintf("SET SESSION lock_wait_timeout = %d", max(1, int(hold.Round(time.Second)/time.Second))))
			if err == nil {
				_, err = rn.Execute(rename)
			}
			renamed <- err
		}()
		err := r.waitQueued(rn.GetConnectionID(), deadline, renamed)
		if err == nil {
			err = r.stall(ctx, StageCutOver)
		}
		if err != nil {
			_, _ = r.conn.Execute(fmt.Sprintf("KILL QUERY %d", rn.GetConnectionID()))
			if <-renamed != nil {
				unannounce()
			}
			r.stream.setClosing(false)
			return errRetry{err}
		}
		unlock()
		if err := r.awaitRename(rn.GetConnectionID(), renamed, deadline); err != nil {
			// The RENAME failed after the unlock: nothing was swapped,
			// and writes since then are in the stream.
			unannounce()
			r.stream.setClosing(false)
			return errRetry{fmt.Errorf("RENAME TABLE: %w", err)}
		}
		r.swapped.Store(true)
		return nil
	})
	if err != nil {
		if !r.swapped.Load() && ctx.Err() == nil && (isLockTimeout(err) || errors.Is(err, errBehind) || errors.Is(err, errConnect)) {
			return errRetry{err}
		}
		return err
	}
	r.log.Info("ddl: swapped", "writes_blocked_for", time.Since(lockedAt), "held_for", time.Since(deadline.Add(-hold)),
		"statements_held_total", r.p.fence.held.Load())
	return nil
}

// renameBound is how long the RENAME may wait for its locks once L has
// unlocked. Its exclusive lock is pending meanwhile, and every statement
// on the table waits behind it, plain reads directly on the backend
// included: a session that holds the table (a transaction that read it)
// must not keep it queued for long. Normally it is granted in
// milliseconds.
const renameBound = 750 * time.Millisecond

// awaitRename waits for the RENAME queued as connection id to finish.
// While it waits for its locks it may do so for renameBound (or what
// remains of the attempt, if less, but not under a quarter of a second);
// past it, it is killed, and nothing was swapped. Once granted its locks
// it is renaming, and is let finish. Should the kill meet it just as it
// was granted, the backend's table names say whether it swapped.
func (r *runner) awaitRename(id uint32, renamed <-chan error, deadline time.Time) error {
	bound := time.After(max(min(time.Until(deadline), renameBound), 250*time.Millisecond))
	for {
		select {
		case err := <-renamed:
			return err
		case <-bound:
		}
		if r.renameState(id) != "Waiting for table metadata lock" {
			bound = time.After(10 * time.Millisecond) // renaming: look again
			continue
		}
		_, _ = r.conn.Execute(fmt.Sprintf("KILL QUERY %d", id))
		err := <-renamed
		if err == nil || r.shadowGone() {
			return nil // (it finished as it was killed)
		}
		return fmt.Errorf("waited for its locks longer than the bound (a session holds the table): %w", err)
	}
}

// renameState is connection id's state in the process list ("" if gone
// or not known).
func (r *runner) renameState(id uint32) string {
	res, err := r.conn.Execute("SELECT IFNULL(STATE, '') FROM information_schema.PROCESSLIST WHERE ID = ?", id)
	if err != nil || res.RowNumber() == 0 {
		return ""
	}
	state, _ := res.GetString(0, 0)
	return state
}

// shadowGone reports whether the shadow's name is gone from the schema
// and the original's kept name is there: the RENAME swapped.
func (r *runner) shadowGone() bool {
	res, err := r.conn.Execute("SELECT SUM(TABLE_NAME = ?), SUM(TABLE_NAME = ?) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME IN (?, ?)",
		r.shadow, r.old, r.t.Schema, r.shadow, r.old)
	if err != nil || res.RowNumber() == 0 {
		return false
	}
	shadow, _ := res.GetInt(0, 0)
	old, _ := res.GetInt(0, 1)
	return shadow == 0 && old == 1
}

// waitQueued returns once connection id waits for a metadata lock (the
// RENAME queued behind L's locks), or an error when it does not by
// deadline or its statement ended.
func (r *runner) waitQueued(id uint32, deadline time.Time, done <-chan error) error {
	for {
		if r.renameState(id) == "Waiting for table metadata lock" {
			return nil
		}
		select {
		case err := <-done:
			if err == nil {
				err = errors.New("RENAME TABLE finished while the table was locked")
			}
			return fmt.Errorf("RENAME TABLE ended before it could be queued: %w", err)
		default:
		}
		if time.Now().After(deadline) {
			return errors.New("RENAME TABLE was not queued within the cut-over bound")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// carryAutoIncrement gives the shadow the table's AUTO_INCREMENT counter,
// which CREATE TABLE ... LIKE does not copy: after the swap, ids freed by
// deleting the newest rows must not be handed out again. The table is
// read-locked, so its counter cannot move.
func (r *runner) carryAutoIncrement() error {
	res, err := r.conn.Execute(`SELECT IFNULL(AUTO_INCREMENT, 0) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME IN (?, ?) ORDER BY TABLE_NAME = ?`,
		r.t.Schema, r.t.Table, r.shadow, r.shadow)
	if err != nil || res.RowNumber() != 2 {
		return err
	}
	orig, _ := res.GetUint(0, 0)
	cur, _ := res.GetUint(1, 0)
	if orig <= cur {
		return nil
	}
	_, err = r.conn.Execute(fmt.Sprintf(r.mark+"ALTER TABLE %s AUTO_INCREMENT = %d", mysqlwire.QuoteTable(r.t.Schema, r.shadow), orig))
	return err
}

// waitTransactions waits until the transactions open now have ended, or
// until by: most are a client's few statements, done in milliseconds; a
// longer one is left to the table lock's wait. Two lists say which are
// open. InnoDB's (information_schema.INNODB_TRX) has every client's,
// through the proxy or not, but only from a transaction's first read or
// write; a transaction's id stays the same until it ends. Reading it needs
// the PROCESS privilege; without it, only the second list is waited for.
// The fence's has the proxy's sessions whose transaction began before
// epoch, from their BEGIN on: one that has sent only BEGIN so far is in
// no InnoDB list, and its statements are not held; had the swap not waited
// for it, it could read the table now, and its write after the RENAME
// queued would deadlock with the RENAME (1213). Neither list has the
// job's own connection nor the sessions the fence holds, which wait for
// the swap.
func (r *runner) waitTransactions(ctx context.Context, epoch uint64, by time.Time) error {
	// open lists InnoDB's transactions to wait for: those of ids in was,
	// or all when was is nil.
	open := func(was map[string]bool) (map[string]bool, error) {
		res, err := r.conn.Execute("SELECT trx_id, trx_mysql_thread_id FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id <> CONNECTION_ID()")
		if err != nil {
			return nil, err
		}
		now := map[string]bool{}
		for i := range res.RowNumber() {
			id, _ := res.GetString(i, 0)
			thread, _ := res.GetUint(i, 1)
			if (was == nil || was[id]) && !r.p.fence.isWaiting(thread) {
				now[id] = true
			}
		}
		return now, nil
	}
	innodb := true
	ids, err := open(nil)
	if lacksProcess(err) {
		r.log.Warn("ddl: the job's user lacks the PROCESS privilege: the cut-over waits only for transactions through this proxy", "err", err)
		innodb, err = false, nil
	}
	for err == nil {
		sessions := r.p.fence.openBefore(epoch)
		if len(ids) == 0 && len(sessions) == 0 {
			return nil
		}
		if time.Now().After(by) {
			r.logOpenTransactions(ids, sessions)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
		if innodb {
			ids, err = open(ids)
		}
	}
	return err
}

// logOpenTransactions says which transactions the cut-over did not wait
// for, and what they run: InnoDB's by id, the proxy's sessions by their
// client connection id.
func (r *runner) logOpenTransactions(ids map[string]bool, sessions []uint32) {
	if len(ids) == 0 {
		r.log.Info("ddl: cut-over goes on with transactions still open", "sessions", sessions)
		return
	}
	res, err := r.conn.Execute("SELECT t.trx_id, t.trx_mysql_thread_id, t.trx_state, t.trx_started, " +
		"CONCAT_WS(' / ', p.COMMAND, p.STATE, p.USER, LEFT(p.INFO, 80)) FROM information_schema.INNODB_TRX t " +
		"LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id")
	if err != nil {
		return
	}
	var open []string
	for i := range res.RowNumber() {
		if id, _ := res.GetString(i, 0); ids[id] {
			thread, _ := res.GetInt(i, 1)
			state, _ := res.GetString(i, 2)
			started, _ := res.GetString(i, 3)
			query, _ := res.GetString(i, 4)
			open = append(open, fmt.Sprintf("thread %d %s since %s: %s", thread, state, started, query))
		}
	}
	r.log.Info("ddl: cut-over goes on with transactions still open", "transactions", open, "sessions", sessions)
}

// lacksProcess reports whether err is the backend's refusal to show other
// sessions' transactions to a user without the PROCESS privilege.
func lacksProcess(err error) bool {
	var me *mysql.MyError
	return errors.As(err, &me) && me.Code == mysql.ER_SPECIFIC_ACCESS_DENIED_ERROR
}
