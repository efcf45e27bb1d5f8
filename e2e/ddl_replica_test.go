package e2e

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"tableproxy/internal/testdb"
)

// TestDDLThrottleOnReplicaLag: a real replica of the backend, its applier
// held back by MASTER_DELAY, lags behind the job's writes. The copy waits
// while the replica's Seconds_Behind_Master exceeds
// tableproxy_ddl_max_replica_lag, and goes on once the replica has caught
// up; the replica ends with the index and the same rows.
func TestDDLThrottleOnReplicaLag(t *testing.T) {
	e := newDDLEnv(t)
	rep, repBackend := e.privateReplica(t, "2")
	replica := repBackend.Root(t)
	e.restartWith(t, e.ddlOptions(fmt.Sprintf(", chunk_rows: 500, replicas: ['tproot:tproot@%s']", rep.Addr())))
	e.seed(t, 20000)
	waitFor(t, 30*time.Second, "the replica to have the table", func() (bool, error) {
		var n int
		if err := replica.QueryRow("SELECT COUNT(*) FROM `" + e.db + "`.t").Scan(&n); err != nil {
			return false, replicaError(replica)
		}
		return n == 20000, nil
	})
	app, admin := e.open(t, e.app), e.open(t, e.admin)
	mustExec(t, admin, "SET GLOBAL tableproxy_ddl_max_replica_lag = 2")

	// From now on the replica applies each event 60 s after the primary
	// wrote it: a write now makes it lag.
	repBackend.Exec(t, "STOP SLAVE", "CHANGE MASTER TO MASTER_DELAY = 60", "START SLAVE")
	e.backend.Exec(t, "UPDATE `"+e.db+"`.t SET c = 'marker' WHERE id = 1")
	waitFor(t, 30*time.Second, "the replica to lag more than 2 s", func() (bool, error) {
		lag, err := secondsBehind(replica)
		return lag > 2, err
	})

	before := showJobsCount(t, admin)
	done := goExec(app, "ALTER TABLE t ADD INDEX idx_c (c)")
	waitJob(t, admin, 20*time.Second, "the job to be throttled", func(j ddlJob) bool {
		return int(j.ID) > before && j.State == "throttled"
	})
	time.Sleep(500 * time.Millisecond) // a chunk under way when the throttle began finishes
	j, _ := lastJob(admin)
	time.Sleep(time.Second)
	if j2, _ := lastJob(admin); j2.State != "throttled" || j2.RowsDone != j.RowsDone {
		t.Errorf("the job moved while the replica lagged: %+v then %+v", j, j2)
	}
	if log := e.proxy.stderr.String(); !strings.Contains(log, "lags") || !strings.Contains(log, "tableproxy_ddl_max_replica_lag 2") {
		t.Errorf("the log does not say the replica lags:\n%s", log)
	}

	// The replica catches up: the job goes on and succeeds.
	repBackend.Exec(t, "STOP SLAVE", "CHANGE MASTER TO MASTER_DELAY = 0", "START SLAVE")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ALTER: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the job did not finish after the replica caught up")
	}
	if !strings.Contains(e.proxy.stderr.String(), "copy no longer throttled") {
		t.Errorf("the log does not show the throttle ending")
	}
	waitFor(t, 30*time.Second, "the replica to apply the swap", func() (bool, error) {
		var n int
		err := replica.QueryRow("SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 't' AND INDEX_NAME = 'idx_c'", e.db).Scan(&n)
		return n > 0, err
	})
	direct := e.direct(t)
	if a, b := tableSum(t, direct, "t"), tableSum(t, testdb.Open(t, testdb.DSN(rep.Addr(), "tproot", "tproot", e.db, nil)), "t"); a != b {
		t.Errorf("replica's table differs from the primary's: %s vs %s", b, a)
	}
}

// privateReplica starts a MariaDB of the test's own with serverID and has it
// replicate the test's database only, from the backend's position now.
func (e *ddlEnv) privateReplica(t *testing.T, serverID string) (*testdb.Private, testdb.Backend) {
	t.Helper()
	rep := startPrivateMariaDBWithID(t, serverID)
	repBackend := testdb.Backend{Addr: rep.Addr(), RootUser: "tproot", RootPassword: "tproot"}
	var file, doDB, ignoreDB string
	var pos int64
	if err := e.backend.Root(t).QueryRow("SHOW MASTER STATUS").Scan(&file, &pos, &doDB, &ignoreDB); err != nil {
		t.Fatal(err)
	}
	_, port, _ := strings.Cut(e.backend.Addr, ":")
	repBackend.Exec(t,
		"CREATE DATABASE `"+e.db+"`",
		"SET GLOBAL replicate_wild_do_table = '"+e.db+".%'", // (replicate_do_db would go by the default database)
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = %s, MASTER_USER = 'tproot', MASTER_PASSWORD = 'tproot', MASTER_LOG_FILE = '%s', MASTER_LOG_POS = %d", port, file, pos),
		"START SLAVE")
	return rep, repBackend
}

// slaveStatus is a replica's SHOW SLAVE STATUS, by column.
func slaveStatus(db *sql.DB) (map[string]sql.NullString, error) {
	rows, err := db.Query("SHOW SLAVE STATUS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil || !rows.Next() {
		return nil, fmt.Errorf("SHOW SLAVE STATUS: no row (%v)", err)
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	st := make(map[string]sql.NullString, len(cols))
	for i, c := range cols {
		st[c] = vals[i]
	}
	return st, nil
}

// replicaError is what a replica reports as its last errors, if any.
func replicaError(db *sql.DB) error {
	st, err := slaveStatus(db)
	if err != nil {
		return err
	}
	if io, sqlErr := st["Last_IO_Error"].String, st["Last_SQL_Error"].String; io != "" || sqlErr != "" {
		return fmt.Errorf("replica: IO error %q, SQL error %q", io, sqlErr)
	}
	return nil
}

// secondsBehind is a replica's Seconds_Behind_Master, -1 when NULL.
func secondsBehind(db *sql.DB) (int64, error) {
	st, err := slaveStatus(db)
	if err != nil {
		return 0, err
	}
	v := st["Seconds_Behind_Master"]
	if !v.Valid {
		return -1, replicaError(db)
	}
	var n int64
	_, err = fmt.Sscan(v.String, &n)
	return n, err
}
