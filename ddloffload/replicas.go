package ddloffload

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/binlog"
)

// The replicas the throttle reads, and how far behind each one is.
//
// Which: the replicas option lists them as user:password@host:port; an
// entry user:password@discover stands for every replica the primary lists
// (SHOW SLAVE HOSTS on MariaDB, SHOW REPLICAS on MySQL), listed again every
// discoverEvery, read with those credentials.
//
// How far behind: Seconds_Behind_Master is coarse (whole seconds, from the
// events' timestamps, and 0 while the replica's IO thread is itself
// behind). Where the primary has a GTID position (MariaDB's
// @@gtid_binlog_pos), the throttle samples it, with the time, at every
// measure, and a replica's lag is the age of the oldest sample its
// @@gtid_slave_pos has not reached: exact to a measure (throttleEvery),
// whatever the hosts' clocks, as a heartbeat row is, without writing one
// (and without a row a replication filter could leave out). Elsewhere
// Seconds_Behind_Master is read.
//
// A replica that does not replicate (its SQL or IO thread stopped, or not
// a replica at all) counts as too far behind: copying on would only widen
// a gap nobody can see. One that cannot be reached for replica_timeout,
// or that the primary no longer lists, is gone: logged, shown in the job's
// row, and not waited for (it is read again if it comes back).

const (
	discoverEvery = 10 * time.Second
	maxGTIDMarks  = 1 << 14 // an hour of marks at throttleEvery
	discoverHost  = "discover"
)

// replica is one replica to read, or (addr discoverHost) the credentials
// to read the discovered ones with.
type replica struct{ user, password, addr string }

func parseReplica(s string) (replica, error) {
	cred, addr, ok := strings.Cut(s, "@")
	if !ok {
		return replica{}, fmt.Errorf("%q: want user:password@host:port or user:password@discover", redact(s))
	}
	user, pw, _ := strings.Cut(cred, ":")
	if user == "" {
		return replica{}, fmt.Errorf("%q: want user:password@host:port or user:password@discover", redact(s))
	}
	if addr != discoverHost {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return replica{}, fmt.Errorf("%q: want user:password@host:port or user:password@discover", redact(s))
		}
	}
	return replica{user, pw, addr}, nil
}

// redact hides a password in a replica entry.
func redact(s string) string {
	cred, addr, ok := strings.Cut(s, "@")
	if !ok {
		return "..."
	}
	user, _, _ := strings.Cut(cred, ":")
	return user + ":***@" + addr
}

// replicaState is what the throttle knows of one replica.
type replicaState struct {
	rep          replica
	discovered   bool
	conn         *client.Conn
	failingSince time.Time // first failure of the current run of failures
	gone         bool
	lag          time.Duration
	status       string    // for the job's row
	anchored     bool      // it has reached a GTID mark: its lag is read from them alone
	need         time.Time // the oldest mark its next read may need: the first it had not reached
}

// gtidMark is the primary's GTID position at a moment: domain → sequence.
type gtidMark struct {
	pos map[uint64]uint64
	at  time.Time
}

// replicaWatch reads the replicas for one throttle.
type replicaWatch struct {
	r        *runner
	states   map[string]*replicaState // by address
	listedAt time.Time
	marks    []gtidMark
	lastPos  string
	noGTID   bool // the primary has no @@gtid_binlog_pos

	heldSince time.Time // the lag check has held the copy since
	holds     int
	held      time.Duration
	maxLag    time.Duration
}

func newReplicaWatch(r *runner) *replicaWatch {
	return &replicaWatch{r: r, states: map[string]*replicaState{}}
}

// stageEnded records, in the job, what the replicas did during a stage.
func (w *replicaWatch) stageEnded() {
	w.endHold(time.Now())
	if w.holds > 0 || w.maxLag > 0 {
		w.r.log.Info("ddl: replica lag so far", "max", w.maxLag.Round(time.Millisecond), "held_times", w.holds, "held_for", w.held.Round(time.Millisecond))
	}
	_ = w.r.p.jobs.update(w.r.rec, func(j *Job) {
		j.LagHolds, j.LagHeldSeconds = w.holds, w.held.Seconds()
		j.ReplicaLagMaxMs = max(j.ReplicaLagMaxMs, w.maxLag.Milliseconds())
		j.Replicas = w.summary()
	})
}

// close ends the job's connections to the replicas.
func (w *replicaWatch) close() {
	for _, s := range w.states {
		if s.conn != nil {
			s.conn.Close()
		}
	}
}

// check reads every replica on c's primary and returns why the copy must
// wait ("" when none lags more than limit).
func (w *replicaWatch) check(ctx context.Context, c *client.Conn, limit time.Duration) string {
	now := time.Now()
	if why := w.list(c, now); why != "" {
		return why
	}
	w.sample(c, now)
	why := ""
	for _, addr := range w.addrs() {
		s := w.states[addr]
		if r := w.measure(ctx, s, now); r != "" && why == "" {
			why = r
		} else if r == "" && s.lag > limit && why == "" {
			why = fmt.Sprintf("replica %s lags %v > tableproxy_ddl_max_replica_lag %d", addr, s.lag.Round(time.Millisecond), int64(limit/time.Second))
		}
	}
	w.prune()
	if why != "" && w.heldSince.IsZero() {
		w.heldSince = now
		w.holds++
	} else if why == "" {
		w.endHold(now)
	}
	info := w.summary()
	w.r.rec.replicas.Store(&info)
	return why
}

func (w *replicaWatch) endHold(now time.Time) {
	if !w.heldSince.IsZero() {
		w.held += now.Sub(w.heldSince)
		w.heldSince = time.Time{}
	}
}

func (w *replicaWatch) addrs() []string {
	out := make([]string, 0, len(w.states))
	for a := range w.states {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// summary is the replicas column: each replica and its state.
func (w *replicaWatch) summary() string {
	var parts []string
	for _, a := range w.addrs() {
		parts = append(parts, a+": "+w.states[a].status)
	}
	return strings.Join(parts, "; ")
}

// list brings the set of replicas up to date: the listed ones, and every
// discoverEvery the primary's own list.
func (w *replicaWatch) list(c *client.Conn, now time.Time) string {
	var creds *replica
	for _, e := range w.r.p.opts.Replicas {
		rep, err := parseReplica(e)
		if err != nil {
			continue // (refused when the options were read)
		}
		if rep.addr == discoverHost {
			creds = &rep
			continue
		}
		if w.states[rep.addr] == nil {
			w.states[rep.addr] = &replicaState{rep: rep, status: "not read yet"}
		}
	}
	if creds == nil || now.Sub(w.listedAt) < discoverEvery {
		return ""
	}
	addrs, err := discoverReplicas(c)
	if err != nil {
		return fmt.Sprintf("cannot list the primary's replicas: %v", err)
	}
	w.listedAt = now
	for _, a := range addrs {
		if w.states[a] == nil {
			w.states[a] = &replicaState{rep: replica{creds.user, creds.password, a}, discovered: true, status: "not read yet"}
			w.r.log.Info("ddl: replica discovered", "replica", a)
		}
	}
	for a, s := range w.states {
		if s.discovered && !slices.Contains(addrs, a) {
			w.r.log.Warn("ddl: replica no longer listed by the primary; not waited for", "replica", a)
			if s.conn != nil {
				s.conn.Close()
			}
			delete(w.states, a)
		}
	}
	return ""
}

// discoverReplicas lists the replicas the primary knows of, as host:port.
func discoverReplicas(c *client.Conn) ([]string, error) {
	res, err := c.Execute("SHOW SLAVE HOSTS")
	if err != nil {
		if res, err = c.Execute("SHOW REPLICAS"); err != nil { // MySQL 8.0.22+
			return nil, err
		}
	}
	var out []string
	for i := range res.RowNumber() {
		host, _ := res.GetStringByName(i, "Host")
		port, _ := res.GetIntByName(i, "Port")
		if host == "" || port == 0 || host == binlog.ReportHost {
			continue // no address to read it at (report_host unset on MySQL), or a proxy's binary-log stream
		}
		out = append(out, net.JoinHostPort(host, strconv.FormatInt(port, 10)))
	}
	slices.Sort(out)
	return out, nil
}

// sample records the primary's GTID position, if it moved.
func (w *replicaWatch) sample(c *client.Conn, now time.Time) {
	if w.noGTID {
		return
	}
	res, err := c.Execute("SELECT @@gtid_binlog_pos")
	if err != nil {
		w.noGTID = true // not MariaDB: Seconds_Behind_Master it is
		return
	}
	pos, _ := res.GetString(0, 0)
	if pos == w.lastPos {
		return
	}
	w.lastPos = pos
	if m, ok := parseGTIDPos(pos); ok {
		w.marks = append(w.marks, gtidMark{m, now})
	}
}

// parseGTIDPos reads a MariaDB GTID position, domain-server-seq[, ...].
func parseGTIDPos(s string) (map[uint64]uint64, bool) {
	out := map[uint64]uint64{}
	for _, g := range strings.Split(s, ",") {
		g = strings.TrimSpace(g)
		if g == "" {
			continue
		}
		parts := strings.Split(g, "-")
		if len(parts) != 3 {
			return nil, false
		}
		d, err1 := strconv.ParseUint(parts[0], 10, 64)
		n, err2 := strconv.ParseUint(parts[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, false
		}
		out[d] = n
	}
	return out, true
}

// reached reports whether position have includes every transaction of m.
func (m gtidMark) reached(have map[uint64]uint64) bool {
	for d, n := range m.pos {
		if have[d] < n {
			return false
		}
	}
	return true
}

// measure reads one replica: its lag into s.lag, or why the copy must
// wait for it regardless of lag.
func (w *replicaWatch) measure(ctx context.Context, s *replicaState, now time.Time) string {
	lag, how, err := w.read(ctx, s, now)
	if err != nil && ctx.Err() != nil {
		return "" // the stage ended while reading: nothing learned
	}
	if err != nil {
		if s.conn != nil {
			s.conn.Close()
			s.conn = nil
		}
		if s.failingSince.IsZero() {
			s.failingSince = now
		}
		if now.Sub(s.failingSince) >= time.Duration(w.r.p.opts.ReplicaTimeout) {
			if !s.gone {
				s.gone = true
				w.r.log.Warn("ddl: replica gone; the copy no longer waits for it", "replica", s.rep.addr, "unreachable_for", now.Sub(s.failingSince).Round(time.Second), "err", err)
			}
			s.status = fmt.Sprintf("gone since %s (%v): not waited for", s.failingSince.UTC().Format("15:04:05"), err)
			return ""
		}
		s.status = fmt.Sprintf("unreachable (%v)", err)
		return fmt.Sprintf("replica %s: %v", s.rep.addr, err)
	}
	if s.gone {
		w.r.log.Info("ddl: replica back; the copy waits for it again", "replica", s.rep.addr)
	}
	s.failingSince, s.gone = time.Time{}, false
	if lag < 0 && s.discovered && how == "not a replica" {
		// Listed by the primary, but no replica: another tool reading
		// its binary log.
		s.status = "not a replica: not waited for"
		return ""
	}
	if lag < 0 {
		s.status = "not replicating"
		return fmt.Sprintf("replica %s is not replicating", s.rep.addr)
	}
	s.lag = lag
	w.maxLag = max(w.maxLag, lag)
	s.status = fmt.Sprintf("lag %v (%s)", lag.Round(time.Millisecond), how)
	return ""
}

// read measures a replica's lag: from the GTID marks where the primary
// has them, else Seconds_Behind_Master; -1 when it does not replicate.
func (w *replicaWatch) read(ctx context.Context, s *replicaState, now time.Time) (time.Duration, string, error) {
	if s.conn == nil {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		c, err := client.ConnectWithContext(cctx, s.rep.addr, s.rep.user, s.rep.password, "", 5*time.Second)
		if err != nil {
			return 0, "", err
		}
		s.conn = c
	}
	behind, err := secondsBehind(s.conn)
	if err != nil {
		return 0, "", err
	}
	if behind == notAReplica {
		return -1, "not a replica", nil
	}
	if behind < 0 {
		return -1, "", nil
	}
	sbm := time.Duration(behind) * time.Second
	if len(w.marks) > 0 {
		if res, err := s.conn.Execute("SELECT @@gtid_slave_pos"); err == nil {
			pos, _ := res.GetString(0, 0)
			if have, ok := parseGTIDPos(pos); ok {
				return s.lagFromMarks(w.marks, have, now, sbm), "gtid", nil
			}
		}
	}
	return sbm, "seconds_behind_master", nil
}

// lagFromMarks is the lag of a replica at position have: the age of the
// first mark it has not reached (0 when it has reached them all). It
// remembers that mark as the oldest its next read needs (prune keeps it).
func (s *replicaState) lagFromMarks(marks []gtidMark, have map[uint64]uint64, now time.Time, sbm time.Duration) time.Duration {
	for i, m := range marks {
		if m.reached(have) {
			s.anchored = true
			continue
		}
		s.need = m.at
		if i == 0 && !s.anchored {
			// It has reached no mark yet: it may be further behind than
			// the marks go back (the job's first measure), which only its
			// own figure shows. (Once anchored, that figure is not read:
			// it jumps by a long statement's duration.)
			return max(now.Sub(m.at), sbm)
		}
		return now.Sub(m.at)
	}
	s.anchored = true
	s.need = marks[len(marks)-1].at // the next reads compare with the newest
	return 0
}

// notAReplica is secondsBehind's answer for a server with no replication
// configured.
const notAReplica = -2

// secondsBehind is the largest Seconds_Behind_Master of a replica's
// connections, -1 when one does not replicate, notAReplica when it has
// none.
func secondsBehind(c *client.Conn) (int64, error) {
	res, err := c.Execute("SHOW ALL SLAVES STATUS")
	if err != nil {
		var me *mysql.MyError
		if !errors.As(err, &me) {
			return 0, err // the connection, not the statement
		}
		if res, err = c.Execute("SHOW REPLICA STATUS"); err != nil { // MySQL
			return 0, err
		}
	}
	if res.RowNumber() == 0 {
		return notAReplica, nil
	}
	lag := int64(0)
	for i := 0; i < res.RowNumber(); i++ {
		name := "Seconds_Behind_Master"
		v, err := res.GetValueByName(i, name)
		if err != nil {
			name = "Seconds_Behind_Source"
			if v, err = res.GetValueByName(i, name); err != nil {
				return 0, err
			}
		}
		if v == nil {
			return -1, nil
		}
		n, _ := res.GetIntByName(i, name)
		lag = max(lag, n)
	}
	return lag, nil
}

// prune drops the marks every replica read has reached, keeping for each
// the first it had not (its lag is that mark's age until it reaches it),
// and the oldest beyond maxGTIDMarks.
func (w *replicaWatch) prune() {
	var live []*replicaState
	for _, s := range w.states {
		if !s.gone && s.conn != nil {
			live = append(live, s)
		}
	}
	w.pruneFor(live)
}

// pruneFor is prune for the replicas read.
func (w *replicaWatch) pruneFor(states []*replicaState) {
	oldest := len(w.marks)
	for _, s := range states {
		i := 0
		for i < len(w.marks)-1 && w.marks[i].at.Before(s.need) {
			i++
		}
		oldest = min(oldest, i)
	}
	if len(w.marks)-oldest > maxGTIDMarks {
		oldest = len(w.marks) - maxGTIDMarks
	}
	if oldest > 0 && oldest <= len(w.marks) {
		w.marks = slices.Delete(w.marks, 0, oldest)
	}
}
