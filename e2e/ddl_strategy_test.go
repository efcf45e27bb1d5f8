package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// jobStrategy is the strategy and reason of the newest finished job on
// table, read from tableproxy.ddl_jobs.
func jobStrategy(t *testing.T, e *ddlEnv, table string) (strategy, reason string) {
	t.Helper()
	rows, err := e.open(t, e.app).Query(fmt.Sprintf("SELECT strategy, strategy_reason, state FROM tableproxy.ddl_jobs WHERE table_name = '%s'", table))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if !rows.Next() {
		t.Fatalf("no job on %s: %v", table, rows.Err())
	}
	var state string
	if err := rows.Scan(&strategy, &reason, &state); err != nil {
		t.Fatal(err)
	}
	if state != "done" {
		t.Errorf("the job on %s is %s", table, state)
	}
	return strategy, reason
}

// TestDDLAutoStrategy: with the default strategy, an ADD INDEX the backend
// would accept succeeds through the proxy. Tables the copy-and-swap cannot
// carry (foreign keys either way, triggers) and small tables get the
// backend's own online build; a table of native_below or more gets the
// online copy. The choice and why are in tableproxy.ddl_jobs and ADMIN SHOW
// DDL JOBS. An explicit strategy is followed: backfill on a table with
// foreign keys is refused, saying why.
func TestDDLAutoStrategy(t *testing.T) {
	e := newDDLEnv(t)
	e.restartWith(t, fmt.Sprintf("  - name: ddloffload\n    options: {binlog_user: %s}\n", e.admin.name))
	app := e.open(t, e.app)
	// What a Knex migration sends: the tables, then each index as an ALTER
	// of its own.
	for _, q := range []string{
		"CREATE TABLE users (id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, email VARCHAR(255) NOT NULL, name VARCHAR(255))",
		"CREATE TABLE posts (id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, user_id INT UNSIGNED NOT NULL, title VARCHAR(255), " +
			"CONSTRAINT posts_user_id_foreign FOREIGN KEY (user_id) REFERENCES users (id))",
		"INSERT INTO users (email, name) VALUES ('a@x', 'a'), ('b@x', 'b')",
		"INSERT INTO posts (user_id, title) VALUES (1, 'one'), (2, 'two')",
		"ALTER TABLE posts ADD INDEX posts_title_index (title)",
		"ALTER TABLE users ADD UNIQUE users_email_unique (email)",
		"CREATE TABLE audited (id INT PRIMARY KEY, v INT)",
		"CREATE INDEX audited_v ON audited (v)",
		"CREATE TABLE empty_one (id INT PRIMARY KEY, v INT)",
		"ALTER TABLE empty_one ADD INDEX (v)",
	} {
		if _, err := app.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if strings.HasPrefix(q, "CREATE TABLE audited") {
			// As root: with the binary log on, a trigger needs SUPER.
			e.backend.Exec(t, "CREATE TRIGGER `"+e.db+"`.audited_bi BEFORE INSERT ON `"+e.db+"`.audited FOR EACH ROW SET NEW.v = NEW.v + 1")
		}
	}
	direct := e.direct(t)
	for table, key := range map[string]string{"posts": "KEY `posts_title_index` (`title`)", "users": "UNIQUE KEY `users_email_unique` (`email`)",
		"audited": "KEY `audited_v` (`v`)", "empty_one": "KEY `v` (`v`)"} {
		if ddl := showCreate(t, direct, table); !strings.Contains(ddl, key) {
			t.Errorf("%s has no %s:\n%s", table, key, ddl)
		}
	}
	for table, why := range map[string]string{
		"posts":     "auto: `" + e.db + "`.`posts` has or is referenced by foreign keys, which the swap would not carry over",
		"users":     "auto: `" + e.db + "`.`users` has or is referenced by foreign keys, which the swap would not carry over",
		"audited":   "auto: `" + e.db + "`.`audited` has triggers, which the swap would not carry over",
		"empty_one": "of data, under native_below (16MB): the backend's own build is brief",
	} {
		strategy, reason := jobStrategy(t, e, table)
		if strategy != "native" || !strings.HasPrefix(reason, "auto: ") || !strings.Contains(reason, strings.TrimPrefix(why, "auto: ")) {
			t.Errorf("%s: %s (%s), want native (%s)", table, strategy, reason, why)
		}
	}
	if l := leftovers(t, direct); len(l) > 0 {
		t.Errorf("tables left behind: %v", l)
	}

	// Asked for by name, backfill is followed, and refused where it cannot
	// carry the table.
	conn := e.session(t, "SET tableproxy_ddl_strategy = backfill")
	_, err := conn.ExecContext(t.Context(), "ALTER TABLE posts ADD INDEX posts_user_title (user_id, title)")
	wantError(t, err, 1235, "has or is referenced by foreign keys, which the swap would not carry over; the native strategy")
	if ddl := showCreate(t, direct, "posts"); strings.Contains(ddl, "posts_user_title") {
		t.Errorf("refused, yet the index is there:\n%s", ddl)
	}

	// A table of native_below or more is copied online.
	e.seed(t, 20000)
	e.restartWith(t, fmt.Sprintf("  - name: ddloffload\n    options: {native_below: 256KB, binlog_user: %s}\n", e.admin.name))
	want := tableSum(t, direct, "t")
	if _, err := e.open(t, e.app).Exec("ALTER TABLE t ADD INDEX ic (c)"); err != nil {
		t.Fatal(err)
	}
	strategy, reason := jobStrategy(t, e, "t")
	if strategy != "backfill" || !strings.HasPrefix(reason, "auto: ") || !strings.HasSuffix(reason, "of data, native_below is 256KB") {
		t.Errorf("t: %s (%s), want backfill for its size", strategy, reason)
	}
	if got := tableSum(t, direct, "t"); got != want {
		t.Errorf("rows after the job: %s, want %s", got, want)
	}
	j, err := lastJob(e.open(t, e.admin))
	if err != nil {
		t.Fatal(err)
	}
	if j.Table != "t" || j.Strategy.String != "backfill" || j.StrategyReason.String != reason {
		t.Errorf("ADMIN SHOW DDL JOBS: %s %s (%s), want t backfill (%s)", j.Table, j.Strategy.String, j.StrategyReason.String, reason)
	}
}
