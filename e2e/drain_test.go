package e2e

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"tableproxy/internal/testdb"
)

// TestDrainAnswersEveryStatement: SIGTERM with 20 clients writing in a
// loop, each on its own connection (no driver retries): every statement a
// client sent is answered, run (OK, and the row is there) or refused with
// 1053 (and the row is not there); none meets a closed connection.
func TestDrainAnswersEveryStatement(t *testing.T) {
	b := testdb.Get(t)
	db := b.NewDatabase(t)
	app := account{b.NewUser(t, "app-pw", "ALL", db), "app-pw"}
	b.Exec(t, "CREATE TABLE `"+db+"`.t (c INT, n INT, PRIMARY KEY (c, n))")
	p := startProxyOpts(t, b.Addr, []account{app}, proxyOpts{defaults: true})
	const clients = 20
	type outcome struct{ acked, refused, unanswered []int }
	results := make([]outcome, clients)
	var wg sync.WaitGroup
	started := make(chan struct{}, clients)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			conn, err := client.ConnectWithTimeout(p.addr, app.name, app.password, db, 5*time.Second)
			if err != nil {
				t.Errorf("client %d: %v", c, err)
				return
			}
			defer conn.Close()
			started <- struct{}{}
			for n := 0; ; n++ {
				_, err := conn.Execute(fmt.Sprintf("INSERT INTO t VALUES (%d, %d)", c, n))
				var me *mysql.MyError
				switch {
				case err == nil:
					results[c].acked = append(results[c].acked, n)
				case errors.As(err, &me) && me.Code == mysql.ER_SERVER_SHUTDOWN:
					results[c].refused = append(results[c].refused, n)
					return
				case errors.As(err, &me):
					t.Errorf("client %d, row %d: %v", c, n, err)
					return
				default:
					results[c].unanswered = append(results[c].unanswered, n)
					return
				}
			}
		}(c)
	}
	for c := 0; c < clients; c++ {
		<-started
	}
	time.Sleep(time.Second)
	p.stop(t)
	wg.Wait()
	direct := testdb.Open(t, testdb.DSN(b.Addr, b.RootUser, b.RootPassword, db, nil))
	var acked, refused, unanswered int
	for c, r := range results {
		acked += len(r.acked)
		refused += len(r.refused)
		unanswered += len(r.unanswered)
		var rows, maxN int
		if err := direct.QueryRow("SELECT COUNT(*), IFNULL(MAX(n), -1) FROM t WHERE c = ?", c).Scan(&rows, &maxN); err != nil {
			t.Fatal(err)
		}
		if len(r.unanswered) == 0 && (rows != len(r.acked) || maxN != len(r.acked)-1) {
			t.Errorf("client %d: %d rows acknowledged, %d in the table (the last %d)", c, len(r.acked), rows, maxN)
		}
	}
	t.Logf("%d clients: %d statements run and acknowledged, %d refused with 1053, %d unanswered", clients, acked, refused, unanswered)
	if unanswered > 0 {
		t.Errorf("%d statements sent met a closed connection, unanswered", unanswered)
	}
}

// TestClusterLeaderStopHandsOver: a leader stopped with SIGTERM hands its
// leadership to another voter before it exits, so writes through a
// follower go on without waiting out an election (they waited 1.4-1.5 s
// before), and a new leader is known as it exits.
func TestClusterLeaderStopHandsOver(t *testing.T) {
	e := newClusterEnv(t, 3)
	l := e.cacheKV(t)
	db := e.conn(t, e.follower(l), e.app)
	stop := make(chan struct{})
	var longest time.Duration
	var writes int
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			start := time.Now()
			if _, err := db.Exec("UPDATE kv SET v = ? WHERE id = 1", i); err != nil {
				done <- err
				return
			}
			longest = max(longest, time.Since(start))
			writes++
			time.Sleep(5 * time.Millisecond)
		}
	}()
	time.Sleep(500 * time.Millisecond)
	l.p.stop(t)
	// Another leader is known at once, not after an election timeout.
	stopped := time.Now()
	f := e.follower(l)
	for {
		if nl := e.leader(t, f); nl != nil && nl != l {
			break
		}
		if time.Since(stopped) > 10*time.Second {
			t.Fatal("no new leader")
		}
		time.Sleep(10 * time.Millisecond)
	}
	leaderAfter := time.Since(stopped)
	time.Sleep(time.Second)
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("a write through a follower while the leader stopped: %v", err)
	}
	t.Logf("%d writes through a follower while the leader stopped; the longest %v; a new leader known %v after the old one exited",
		writes, longest.Round(time.Millisecond), leaderAfter.Round(time.Millisecond))
	if leaderAfter > 500*time.Millisecond {
		t.Errorf("a new leader was known only %v after the old one exited", leaderAfter)
	}
	if !strings.Contains(l.p.stderr.String(), "leadership handed over before stopping") {
		t.Errorf("the leader did not hand over:\n%s", l.p.stderr.String())
	}
	if longest > time.Second {
		t.Errorf("a write waited %v while the leader stopped", longest)
	}
}

// TestRestartedVoterServesAtOnce: a voter restarted with its data
// directory answers reads as soon as it greets, from the backend while it
// catches up with the cluster's log, and writes once it has: no client
// statement waits for the cluster (reads waited 3.7-10 s before).
func TestRestartedVoterServesAtOnce(t *testing.T) {
	e := newClusterEnv(t, 3)
	l := e.cacheKV(t)
	f := e.follower(l)
	direct := testdb.Open(t, testdb.DSN(e.backend.Addr, e.backend.RootUser, e.backend.RootPassword, e.cacheEnv.db, nil))
	f.p.stop(t)
	if _, err := direct.Exec("UPDATE kv SET v = 7 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	e.startNode(t, f)
	db := e.conn(t, f, e.app)
	start := time.Now()
	var v int
	if err := db.QueryRow("SELECT v FROM kv WHERE id = 1").Scan(&v); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("the first read through the restarted voter took %v", took.Round(time.Millisecond))
	if v != 7 {
		t.Errorf("read %d, want 7 (written directly while it was down)", v)
	}
	if took > time.Second {
		t.Errorf("the first read waited %v", took)
	}
}
