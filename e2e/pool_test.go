package e2e

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// An application's connection pool keeps idle connections that the server
// ends after wait_timeout. Directly, the pool finds them closed and opens
// new ones, so the application sees no error; through the proxy it must see
// none either: the proxy closes a client connection whose backend session
// the server ended.

const (
	poolWaitTimeout = 2 // seconds
	poolRounds      = 3
	poolConcurrency = 4
)

// TestPoolGoSQLDriverIdlePastWaitTimeout: database/sql with go-sql-driver,
// no ConnMaxIdleTime, as many idle connections as the loop uses.
func TestPoolGoSQLDriverIdlePastWaitTimeout(t *testing.T) {
	e := newEnv(t, 1)
	for _, ep := range e.endpoints() {
		t.Run(ep.name, func(t *testing.T) {
			db := e.open(t, ep, map[string]string{"wait_timeout": strconv.Itoa(poolWaitTimeout)})
			db.SetMaxOpenConns(poolConcurrency)
			db.SetMaxIdleConns(poolConcurrency)
			sessions := map[int64]bool{}
			for round := 0; round < poolRounds; round++ {
				for _, id := range poolRound(t, db, round) {
					sessions[id] = true
				}
				time.Sleep((poolWaitTimeout + 1) * time.Second)
			}
			// Directly, new sessions each round show that the server did end
			// the idle ones, so the loop tested what it means to.
			if ep.name == "direct" && len(sessions) < poolRounds*poolConcurrency {
				t.Errorf("%d sessions over %d rounds of %d: the server kept idle sessions past wait_timeout", len(sessions), poolRounds, poolConcurrency)
			}
		})
	}
}

// poolRound runs poolConcurrency queries at once (each holds its connection
// a moment, so all of them are in use) and returns their session ids.
func poolRound(t *testing.T, db *sql.DB, round int) []int64 {
	t.Helper()
	ids := make([]int64, poolConcurrency)
	errs := make([]error, poolConcurrency)
	var wg sync.WaitGroup
	for i := 0; i < poolConcurrency; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var n, slept int64
			errs[i] = db.QueryRow("SELECT ? + 1, CONNECTION_ID(), SLEEP(0.05)", i).Scan(&n, &ids[i], &slept)
			if errs[i] == nil && n != int64(i+1) {
				errs[i] = fmt.Errorf("got %d, want %d", n, i+1)
			}
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("round %d, query %d: %v", round, i, err)
		}
	}
	return ids
}

// TestPoolNodeMysql2IdlePastWaitTimeout: mysql2's createPool, whose
// sessions set a short wait_timeout (its own idleTimeout, 60 s by default,
// is far past it). mysql2 does not check an idle connection before handing
// it out; a pooled connection that ends or errors removes itself from the
// pool, which is what makes the direct run pass: the proxy must end the
// client's connection when the server ends the backend's.
func TestPoolNodeMysql2IdlePastWaitTimeout(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("testdata", "migrations", "knex"))
	if err != nil {
		t.Fatal(err)
	}
	node := nodeProject(t, dir)
	e := newEnv(t, 1)
	settings := []string{"WAIT_TIMEOUT=" + strconv.Itoa(poolWaitTimeout), "ROUNDS=" + strconv.Itoa(poolRounds)}
	for _, ep := range e.endpoints() {
		t.Run(ep.name, func(t *testing.T) {
			runIn(t, dir, append(dbEnv(ep.addr, e.user(), e.db), settings...), node, "pool.js")
		})
	}
}
