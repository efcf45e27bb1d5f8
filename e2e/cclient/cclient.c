/*
 * cclient exercises, through libmariadb, the protocol commands that Go
 * drivers do not send: COM_CHANGE_USER, COM_RESET_CONNECTION,
 * COM_FIELD_LIST, COM_STATISTICS, COM_PING, COM_INIT_DB,
 * COM_STMT_SEND_LONG_DATA, COM_STMT_FETCH (server-side cursors),
 * COM_STMT_RESET, COM_SET_OPTION and COM_PROCESS_KILL, plus multiple
 * results read with mysql_next_result.
 *
 * It prints only deterministic output (no connection ids, no timings), so
 * that a run against MariaDB and a run through tableproxy can be compared
 * byte for byte.
 *
 * usage: cclient host port user password db user2 password2
 * The database must be empty; both users need all privileges on it, and
 * user needs a privilege on the (missing) databases e2e_missing_%.
 * Exit status: 0 when every step ran, 2 when the program could not go on.
 */
#include <mysql.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *host, *db, *user1, *pass1, *user2, *pass2;
static unsigned int port;

static void die(const char *what, MYSQL *m)
{
	printf("FATAL %s: error %u (%s) %s\n", what, mysql_errno(m), mysql_sqlstate(m), mysql_error(m));
	exit(2);
}

static void print_error(const char *what, MYSQL *m)
{
	printf("%s: error %u (%s) %s\n", what, mysql_errno(m), mysql_sqlstate(m), mysql_error(m));
}

static void print_stmt_error(const char *what, MYSQL_STMT *s)
{
	printf("%s: error %u (%s) %s\n", what, mysql_stmt_errno(s), mysql_stmt_sqlstate(s), mysql_stmt_error(s));
}

static void step(const char *name)
{
	printf("\n== %s\n", name);
}

static MYSQL *connect_as(const char *user, const char *pass, const char *database, unsigned long flags)
{
	MYSQL *m = mysql_init(NULL);
	unsigned int timeout = 10;
	my_bool off = 0;
	if (!m) {
		printf("FATAL mysql_init\n");
		exit(2);
	}
	mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
	mysql_options(m, MYSQL_OPT_READ_TIMEOUT, &timeout);
	mysql_options(m, MYSQL_OPT_WRITE_TIMEOUT, &timeout);
	mysql_options(m, MYSQL_OPT_RECONNECT, &off);
	mysql_options(m, MYSQL_SET_CHARSET_NAME, "utf8mb4");
	if (!mysql_real_connect(m, host, user, pass, database, port, NULL, flags))
		die("connect", m);
	return m;
}

static void print_value(const char *v, unsigned long len)
{
	unsigned long i;
	if (!v) {
		printf(" NULL");
		return;
	}
	putchar(' ');
	putchar('\'');
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)v[i];
		if (c < 0x20 || c == 0x7f || c == '\\')
			printf("\\x%02x", c);
		else
			putchar(c);
	}
	putchar('\'');
}

static void print_result(MYSQL_RES *res)
{
	unsigned int i, n = mysql_num_fields(res);
	MYSQL_FIELD *f = mysql_fetch_fields(res);
	MYSQL_ROW row;
	printf("  columns:");
	for (i = 0; i < n; i++)
		printf(" %s(type=%d,len=%lu,dec=%u,flags=%u,cs=%u)", f[i].name, f[i].type, f[i].length,
		       f[i].decimals, f[i].flags, f[i].charsetnr);
	printf("\n");
	while ((row = mysql_fetch_row(res))) {
		unsigned long *len = mysql_fetch_lengths(res);
		printf("  row:");
		for (i = 0; i < n; i++)
			print_value(row[i], len[i]);
		printf("\n");
	}
}

/* run_query runs a (possibly multi-statement) query and prints every
 * result, reading further results with mysql_next_result. */
static void run_query(MYSQL *m, const char *q)
{
	int status;
	printf("query: %s\n", q);
	if (mysql_query(m, q)) {
		print_error("  query", m);
		return;
	}
	do {
		MYSQL_RES *res = mysql_store_result(m);
		if (res) {
			print_result(res);
			mysql_free_result(res);
		} else if (mysql_field_count(m) == 0) {
			printf("  ok: affected=%llu insert_id=%llu warnings=%u\n", (unsigned long long)mysql_affected_rows(m),
			       (unsigned long long)mysql_insert_id(m), mysql_warning_count(m));
		} else {
			print_error("  store", m);
			return;
		}
		status = mysql_next_result(m);
		if (status > 0)
			print_error("  next result", m);
	} while (status == 0);
	printf("  more results: %s\n", mysql_more_results(m) ? "yes" : "no");
}

static void must_query(MYSQL *m, const char *q)
{
	if (mysql_query(m, q))
		die(q, m);
	while (mysql_next_result(m) == 0)
		;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static void step_ping_stat(MYSQL *m)
{
	const char *s;
	step("COM_PING and COM_STATISTICS");
	printf("ping: %d\n", mysql_ping(m));
	/* The statistics string holds uptime and counters, which differ
	 * between any two calls; only its shape is compared. */
	s = mysql_stat(m);
	if (!s)
		print_error("stat", m);
	else
		printf("stat: non-empty=%d starts-with-Uptime=%d\n", s[0] != 0, strncmp(s, "Uptime:", 7) == 0);
	printf("ping after stat: %d\n", mysql_ping(m));
}

static void step_select_db(MYSQL *m)
{
	step("COM_INIT_DB");
	printf("select information_schema: %d\n", mysql_select_db(m, "information_schema"));
	run_query(m, "SELECT DATABASE()");
	if (mysql_select_db(m, "e2e_no_such_db"))
		print_error("select e2e_no_such_db", m);
	else
		printf("select e2e_no_such_db: unexpectedly ok\n");
	run_query(m, "SELECT DATABASE()");
	/* The test grants user1 privileges on e2e_missing_%, so the server
	 * says the database does not exist rather than access denied. */
	if (mysql_select_db(m, "e2e_missing_db"))
		print_error("select e2e_missing_db", m);
	else
		printf("select e2e_missing_db: unexpectedly ok\n");
	run_query(m, "SELECT DATABASE()");
	printf("select test db: %d\n", mysql_select_db(m, db));
	run_query(m, "SELECT DATABASE() = '' AS empty_name, DATABASE() IS NULL AS no_db");
}

static void step_change_user(MYSQL *m)
{
	step("COM_CHANGE_USER");
	must_query(m, "CREATE TABLE cu (a INT) ENGINE=InnoDB");
	run_query(m, "SET @v = 42, SESSION sql_mode = 'ANSI_QUOTES', SESSION autocommit = 0");
	run_query(m, "CREATE TEMPORARY TABLE tmp_cu (a INT)");
	run_query(m, "INSERT INTO cu VALUES (1)");
	run_query(m, "SELECT @v, @@session.sql_mode, @@in_transaction, @@autocommit, COUNT(*) FROM cu");

	if (mysql_change_user(m, user2, pass2, db))
		print_error("change to user2", m);
	else
		printf("change to user2: ok\n");
	/* Everything of the old session is gone: variables, temporary
	 * tables, session settings, and the open transaction (rolled back). */
	run_query(m, "SELECT CURRENT_USER(), DATABASE() IS NOT NULL AS has_db, @v, "
		     "@@session.sql_mode = @@global.sql_mode AS default_mode, @@in_transaction, @@autocommit");
	run_query(m, "SELECT * FROM tmp_cu");
	run_query(m, "SELECT COUNT(*) FROM cu");

	if (mysql_change_user(m, user1, pass1, NULL))
		print_error("change to user1 without db", m);
	else
		printf("change to user1 without db: ok\n");
	run_query(m, "SELECT DATABASE()");
	printf("select test db: %d\n", mysql_select_db(m, db));
	run_query(m, "SELECT COUNT(*) FROM cu");
}

static void step_change_user_denied(MYSQL **mp)
{
	MYSQL *m = *mp;
	step("COM_CHANGE_USER with a wrong password");
	if (mysql_change_user(m, user2, "wrong password", db))
		print_error("change to user2", m);
	else
		printf("change to user2 with a wrong password: unexpectedly ok\n");
	/* A server may keep or close the connection; either way the client
	 * must see the same thing through the proxy. */
	if (mysql_ping(m))
		print_error("ping after denied change", m);
	else
		printf("ping after denied change: ok\n");
	if (mysql_query(m, "SELECT CURRENT_USER()") == 0) {
		MYSQL_RES *res = mysql_store_result(m);
		MYSQL_ROW row = res ? mysql_fetch_row(res) : NULL;
		if (row)
			printf("user after denied change: %s\n",
			       strncmp(row[0], user1, strlen(user1)) == 0 ? "user1" : "other");
		if (res)
			mysql_free_result(res);
	} else {
		print_error("query after denied change", m);
	}
	mysql_close(m);
	*mp = connect_as(user1, pass1, db, CLIENT_MULTI_RESULTS);
}

static void step_reset_connection(MYSQL *m)
{
	MYSQL_STMT *st;
	step("COM_RESET_CONNECTION");
	run_query(m, "SET @v = 7, SESSION sql_mode = 'ANSI_QUOTES'");
	run_query(m, "CREATE TEMPORARY TABLE tmp_rc (a INT)");
	run_query(m, "START TRANSACTION");
	run_query(m, "INSERT INTO cu VALUES (2)");
	st = mysql_stmt_init(m);
	if (mysql_stmt_prepare(st, "SELECT 1", 8))
		print_stmt_error("prepare", st);
	printf("reset: %d\n", mysql_reset_connection(m));
	run_query(m, "SELECT @v, @@session.sql_mode = @@global.sql_mode AS default_mode, @@in_transaction, DATABASE() IS NOT NULL AS has_db");
	run_query(m, "SELECT * FROM tmp_rc");
	run_query(m, "SELECT COUNT(*) FROM cu");
	if (mysql_stmt_execute(st))
		print_stmt_error("execute statement prepared before the reset", st);
	else
		printf("execute statement prepared before the reset: unexpectedly ok\n");
	mysql_stmt_close(st);
	printf("ping: %d\n", mysql_ping(m));
}

static void print_fields(MYSQL_RES *res)
{
	unsigned int i, n = mysql_num_fields(res);
	MYSQL_FIELD *f = mysql_fetch_fields(res);
	for (i = 0; i < n; i++)
		printf("  field %s org=%s table=%s org_table=%s db=%s catalog=%s type=%d length=%lu flags=%u "
		       "decimals=%u charsetnr=%u default=%s\n",
		       f[i].name, f[i].org_name, f[i].table, f[i].org_table, f[i].db, f[i].catalog, f[i].type,
		       f[i].length, f[i].flags, f[i].decimals, f[i].charsetnr, f[i].def ? f[i].def : "(none)");
}

static void step_list_fields(MYSQL *m)
{
	MYSQL_RES *res;
	step("COM_FIELD_LIST");
	must_query(m, "CREATE TABLE lf (id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, "
		      "name VARCHAR(30) NOT NULL DEFAULT 'anon', price DECIMAL(10,2) DEFAULT 9.99, note TEXT, "
		      "flag BIT(3) DEFAULT b'101', born DATETIME(3), nick VARCHAR(10) CHARACTER SET latin1) "
		      "DEFAULT CHARSET=utf8mb4");
	res = mysql_list_fields(m, "lf", NULL);
	if (res) {
		print_fields(res);
		mysql_free_result(res);
	} else {
		print_error("list_fields lf", m);
	}
	res = mysql_list_fields(m, "lf", "n%");
	if (res) {
		print_fields(res);
		mysql_free_result(res);
	} else {
		print_error("list_fields lf n%", m);
	}
	res = mysql_list_fields(m, "no_such_table", NULL);
	if (res) {
		printf("list_fields no_such_table: unexpectedly ok\n");
		mysql_free_result(res);
	} else {
		print_error("list_fields no_such_table", m);
	}
	printf("ping: %d\n", mysql_ping(m));
}

static void fill(char *buf, size_t n, unsigned int seed)
{
	size_t i;
	for (i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (char)(seed >> 16);
	}
}

static void step_long_data(MYSQL *m)
{
	MYSQL_STMT *st = mysql_stmt_init(m);
	MYSQL_BIND b[3];
	int id;
	static char chunk[300000];
	const char *q = "INSERT INTO ld VALUES (?, ?, ?)";
	int i;

	step("COM_STMT_SEND_LONG_DATA and COM_STMT_RESET");
	must_query(m, "CREATE TABLE ld (id INT PRIMARY KEY, b LONGBLOB, t TEXT CHARACTER SET utf8mb4)");
	if (mysql_stmt_prepare(st, q, strlen(q))) {
		print_stmt_error("prepare", st);
		return;
	}
	printf("params: %lu\n", mysql_stmt_param_count(st));
	memset(b, 0, sizeof(b));
	b[0].buffer_type = MYSQL_TYPE_LONG;
	b[0].buffer = &id;
	b[1].buffer_type = MYSQL_TYPE_LONG_BLOB;
	b[2].buffer_type = MYSQL_TYPE_STRING;
	if (mysql_stmt_bind_param(st, b)) {
		print_stmt_error("bind", st);
		return;
	}

	id = 1;
	for (i = 0; i < 3; i++) {
		fill(chunk, sizeof(chunk), (unsigned int)i + 1);
		if (mysql_stmt_send_long_data(st, 1, chunk, sizeof(chunk)))
			print_stmt_error("send_long_data b", st);
	}
	if (mysql_stmt_send_long_data(st, 2, "h\xc3\xa9llo ", 7) || mysql_stmt_send_long_data(st, 2, "w\xc3\xb6rld \xf0\x9f\x98\x80", 11))
		print_stmt_error("send_long_data t", st);
	if (mysql_stmt_execute(st))
		print_stmt_error("execute 1", st);
	else
		printf("execute 1: affected=%llu\n", (unsigned long long)mysql_stmt_affected_rows(st));

	/* Long data sent before a reset is discarded by the server. */
	if (mysql_stmt_send_long_data(st, 1, "discarded", 9))
		print_stmt_error("send_long_data before reset", st);
	printf("stmt reset: %d\n", mysql_stmt_reset(st));
	id = 2;
	if (mysql_stmt_send_long_data(st, 1, "kept", 4) || mysql_stmt_send_long_data(st, 2, "second", 6))
		print_stmt_error("send_long_data after reset", st);
	if (mysql_stmt_execute(st))
		print_stmt_error("execute 2", st);
	else
		printf("execute 2: affected=%llu\n", (unsigned long long)mysql_stmt_affected_rows(st));

	id = 1; /* duplicate key */
	if (mysql_stmt_send_long_data(st, 1, "x", 1) || mysql_stmt_send_long_data(st, 2, "y", 1))
		print_stmt_error("send_long_data 3", st);
	if (mysql_stmt_execute(st))
		print_stmt_error("execute 3", st);
	else
		printf("execute 3: unexpectedly ok\n");
	mysql_stmt_close(st);
	run_query(m, "SELECT id, LENGTH(b), MD5(b), t FROM ld ORDER BY id");

	st = mysql_stmt_init(m);
	if (mysql_stmt_prepare(st, "SELEC ?", 7))
		print_stmt_error("prepare bad statement", st);
	mysql_stmt_close(st);
}

/* fetch_all fetches the open cursor's remaining rows, printing a digest. */
static void fetch_rows(MYSQL_STMT *st, int *id, int limit)
{
	int rc, n = 0, first = -1, last = -1;
	long sum = 0;
	while ((limit < 0 || n < limit) && (rc = mysql_stmt_fetch(st)) == 0) {
		if (first < 0)
			first = *id;
		last = *id;
		sum += *id;
		n++;
	}
	if (limit < 0 && rc != MYSQL_NO_DATA)
		print_stmt_error("  fetch", st);
	printf("  fetched %d rows: first=%d last=%d sum=%ld\n", n, first, last, sum);
}

static void cursor_execute(MYSQL *m, MYSQL_STMT *st, int *param, int v)
{
	*param = v;
	if (mysql_stmt_execute(st)) {
		print_stmt_error("  execute", st);
		return;
	}
	printf("execute id > %d: cursor open=%d\n", v, (m->server_status & SERVER_STATUS_CURSOR_EXISTS) != 0);
}

static void step_cursor(MYSQL *m)
{
	MYSQL_STMT *st = mysql_stmt_init(m);
	const char *q = "SELECT id, v FROM cur WHERE id > ? ORDER BY id";
	unsigned long type = CURSOR_TYPE_READ_ONLY, prefetch = 7;
	MYSQL_BIND p, r[2];
	int param, id;
	char v[32];
	unsigned long vlen;

	step("cursor: COM_STMT_EXECUTE with a cursor, COM_STMT_FETCH, COM_STMT_RESET");
	must_query(m, "CREATE TABLE cur (id INT PRIMARY KEY, v VARCHAR(20))");
	must_query(m, "INSERT INTO cur WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 100) "
		      "SELECT n, CONCAT('v', n) FROM s");
	if (mysql_stmt_attr_set(st, STMT_ATTR_CURSOR_TYPE, &type) || mysql_stmt_attr_set(st, STMT_ATTR_PREFETCH_ROWS, &prefetch))
		print_stmt_error("attr_set", st);
	if (mysql_stmt_prepare(st, q, strlen(q))) {
		print_stmt_error("prepare", st);
		return;
	}
	memset(&p, 0, sizeof(p));
	p.buffer_type = MYSQL_TYPE_LONG;
	p.buffer = &param;
	memset(r, 0, sizeof(r));
	r[0].buffer_type = MYSQL_TYPE_LONG;
	r[0].buffer = &id;
	r[1].buffer_type = MYSQL_TYPE_STRING;
	r[1].buffer = v;
	r[1].buffer_length = sizeof(v);
	r[1].length = &vlen;
	if (mysql_stmt_bind_param(st, &p) || mysql_stmt_bind_result(st, r)) {
		print_stmt_error("bind", st);
		return;
	}

	cursor_execute(m, st, &param, 10);
	fetch_rows(st, &id, -1);
	printf("stmt reset: %d\n", mysql_stmt_reset(st));
	cursor_execute(m, st, &param, 95);
	fetch_rows(st, &id, -1);
	/* Abandon a cursor half-way: reset closes it on the server. */
	cursor_execute(m, st, &param, 0);
	fetch_rows(st, &id, 3);
	printf("stmt reset: %d\n", mysql_stmt_reset(st));
	cursor_execute(m, st, &param, 97);
	fetch_rows(st, &id, -1);
	/* A new execute closes the previous cursor implicitly. */
	cursor_execute(m, st, &param, 50);
	fetch_rows(st, &id, 2);
	cursor_execute(m, st, &param, 90);
	fetch_rows(st, &id, -1);
	mysql_stmt_close(st);
	printf("ping: %d\n", mysql_ping(m));
}

static void step_multi(MYSQL *m)
{
	step("COM_SET_OPTION and multiple results");
	must_query(m, "CREATE PROCEDURE two_sets() BEGIN SELECT 1 AS a; SELECT 'x' AS b, NULL AS c; END");
	/* Connected without CLIENT_MULTI_STATEMENTS: refused until enabled. */
	run_query(m, "SELECT 1 AS a; SELECT 2 AS b");
	printf("multi statements on: %d\n", mysql_set_server_option(m, MYSQL_OPTION_MULTI_STATEMENTS_ON));
	run_query(m, "SELECT 1 AS a; UPDATE cur SET v = CONCAT(v, '!') WHERE id <= 3; "
		     "SELECT id, v FROM cur WHERE id <= 3 ORDER BY id; DO 1");
	run_query(m, "SELECT 'before' AS s; SELECT * FROM no_such_table; SELECT 'after' AS s");
	run_query(m, "CALL two_sets(); SELECT 'after call' AS s");
	printf("multi statements off: %d\n", mysql_set_server_option(m, MYSQL_OPTION_MULTI_STATEMENTS_OFF));
	run_query(m, "SELECT 1 AS a; SELECT 2 AS b");
	run_query(m, "CALL two_sets()");
	run_query(m, "SELECT 'single' AS s");
}

static void step_kill(MYSQL *m)
{
	MYSQL *victim = connect_as(user1, pass1, db, CLIENT_MULTI_RESULTS);
	unsigned long id = mysql_thread_id(victim);
	int i, alive = 1;

	step("COM_PROCESS_KILL");
	printf("victim ping: %d\n", mysql_ping(victim));
	if (mysql_kill(m, id))
		print_error("kill victim", m);
	else
		printf("kill victim: ok\n");
	/* The victim's connection closes asynchronously; poll, bounded. */
	for (i = 0; i < 500 && alive; i++) {
		if (mysql_ping(victim)) {
			unsigned int e = mysql_errno(victim);
			alive = 0;
			printf("victim after kill: %s\n", e == 2006 || e == 2013 ? "connection lost" : mysql_error(victim));
		} else {
			sleep_ms(10);
		}
	}
	if (alive)
		printf("victim after kill: still alive\n");
	mysql_close(victim);
	if (mysql_kill(m, 1073741823UL))
		print_error("kill unknown id", m);
	else
		printf("kill unknown id: unexpectedly ok\n");
	printf("killer ping: %d\n", mysql_ping(m));
}

int main(int argc, char **argv)
{
	MYSQL *m;
	if (argc != 8) {
		fprintf(stderr, "usage: %s host port user password db user2 password2\n", argv[0]);
		return 2;
	}
	host = argv[1];
	port = (unsigned int)atoi(argv[2]);
	user1 = argv[3];
	pass1 = argv[4];
	db = argv[5];
	user2 = argv[6];
	pass2 = argv[7];

	m = connect_as(user1, pass1, db, CLIENT_MULTI_RESULTS);
	printf("connected: server %s\n", mysql_get_server_info(m));
	step_ping_stat(m);
	step_select_db(m);
	step_change_user(m);
	step_change_user_denied(&m);
	step_reset_connection(m);
	step_list_fields(m);
	step_long_data(m);
	step_cursor(m);
	step_multi(m);
	step_kill(m);
	mysql_close(m);
	printf("\ndone\n");
	return 0;
}
