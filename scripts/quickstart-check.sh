#!/usr/bin/env bash
# Checks the README's quick start and five-minute tour as a user runs them:
# scripts/demo.sh, then the tour's statements with the stock `mariadb`
# client, twice in a row, as the demo user and as admin, then the metrics
# page; scripts/demo.sh stop at the end, whatever happened.
#
#   scripts/quickstart-check.sh
#
# The demo runs beside any other instance (scripts/test.sh's MariaDB, say):
# its own run directory and MariaDB port, never TABLEPROXY_RUN_DIR's
# instance. Environment:
#   TABLEPROXY_QUICKSTART_RUN_DIR       the demo's run directory
#                                       (default ${TABLEPROXY_RUN_DIR:-<repo>/.run}/quickstart)
#   TABLEPROXY_QUICKSTART_MARIADB_PORT  its MariaDB's port (default: the first free from 3317)
#   TABLEPROXY_DEMO_PORT                the proxy's port (default: 6033, or the next free one)
#   TABLEPROXY_DEMO_METRICS             the metrics port (default: 9104, or the next free one)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Bounds on every wait.
SQL_TIMEOUT=30         # a read, or a connection
ADD_INDEX_TIMEOUT=300  # ALTER TABLE ... ADD INDEX waits for its job
READY_TIMEOUT=60       # the cached tables' first load
METRICS_TIMEOUT=10
DEMO_START_TIMEOUT=600 # MariaDB's first start, the sample data, go build
DEMO_STOP_TIMEOUT=120

log() { printf 'quickstart-check.sh: %s\n' "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# free_port FIRST: FIRST, or the next port that nothing listens on.
free_port() {
	local p=$1
	while port_in_use "$p"; do
		((p < $1 + 50)) || return 1
		p=$((p + 1))
	done
	echo "$p"
}

abs_dir() {
	mkdir -p "$1" && (cd "$1" && pwd)
}

command -v mariadb >/dev/null 2>&1 || die "the 'mariadb' client is not installed (apt-get install mariadb-client)"
command -v timeout >/dev/null 2>&1 || die "'timeout' (coreutils) is not installed"

SHARED_RUN_DIR="$(abs_dir "${TABLEPROXY_RUN_DIR:-$ROOT/.run}")"
RUN_DIR="$(abs_dir "${TABLEPROXY_QUICKSTART_RUN_DIR:-$SHARED_RUN_DIR/quickstart}")"
[[ "$RUN_DIR" != "$SHARED_RUN_DIR" ]] ||
	die "TABLEPROXY_QUICKSTART_RUN_DIR must not be the run directory of the other instances ($SHARED_RUN_DIR)"

# demo LIMIT start|stop: scripts/demo.sh in the demo's own environment, for
# start and stop alike (the ports are chosen below), for at most LIMIT seconds.
demo() {
	local limit=$1
	shift
	timeout "$limit" env TABLEPROXY_RUN_DIR="$RUN_DIR" TABLEPROXY_MARIADB_PORT="$DB_PORT" \
		TABLEPROXY_DEMO_PORT="$PROXY_PORT" TABLEPROXY_DEMO_METRICS="$METRICS_PORT" \
		"$ROOT/scripts/demo.sh" "$@"
}

# A previous check that was killed may have left its proxy or MariaDB running
# in this run directory (and only there): stop them, and start from scratch,
# as on a first run.
DB_PORT=0 PROXY_PORT=0 METRICS_PORT=0
if [[ -f "$RUN_DIR/proxy.pid" || -f "$RUN_DIR/mariadb/mariadb.pid" ]]; then
	log "stopping what a previous check left running in $RUN_DIR"
	demo "$DEMO_STOP_TIMEOUT" stop ||
		die "could not stop the leftovers of a previous check in $RUN_DIR"
fi
rm -rf "$RUN_DIR/proxy" "$RUN_DIR/mariadb" "$RUN_DIR/proxy.log" "$RUN_DIR/mariadb.env"

if [[ -n "${TABLEPROXY_QUICKSTART_MARIADB_PORT:-}" ]]; then
	DB_PORT=$TABLEPROXY_QUICKSTART_MARIADB_PORT
	port_in_use "$DB_PORT" && die "MariaDB port 127.0.0.1:$DB_PORT (TABLEPROXY_QUICKSTART_MARIADB_PORT) is already in use"
else
	DB_PORT="$(free_port 3317)" || die "no free port in 3317-3367 for the demo's MariaDB; set TABLEPROXY_QUICKSTART_MARIADB_PORT"
fi
if [[ -n "${TABLEPROXY_DEMO_PORT:-}" ]]; then
	PROXY_PORT=$TABLEPROXY_DEMO_PORT
	port_in_use "$PROXY_PORT" && die "proxy port 127.0.0.1:$PROXY_PORT (TABLEPROXY_DEMO_PORT) is already in use"
else
	PROXY_PORT="$(free_port 6033)" || die "no free port in 6033-6083 for the proxy; set TABLEPROXY_DEMO_PORT"
	[[ "$PROXY_PORT" == 6033 ]] || log "port 6033 is in use; the proxy listens on $PROXY_PORT instead"
fi
if [[ -n "${TABLEPROXY_DEMO_METRICS:-}" ]]; then
	METRICS_PORT=$TABLEPROXY_DEMO_METRICS
	port_in_use "$METRICS_PORT" && die "metrics port 127.0.0.1:$METRICS_PORT (TABLEPROXY_DEMO_METRICS) is already in use"
else
	METRICS_PORT="$(free_port 9104)" || die "no free port in 9104-9154 for the metrics; set TABLEPROXY_DEMO_METRICS"
	[[ "$METRICS_PORT" == 9104 ]] || log "port 9104 is in use; the metrics listen on $METRICS_PORT instead"
fi
((PROXY_PORT != METRICS_PORT && PROXY_PORT != DB_PORT && METRICS_PORT != DB_PORT)) ||
	die "the MariaDB ($DB_PORT), proxy ($PROXY_PORT) and metrics ($METRICS_PORT) ports must differ"

STARTED=0
on_exit() {
	local rc=$? stop_rc=0
	trap - EXIT
	if ((STARTED)); then
		echo
		log "stopping the demo (scripts/demo.sh stop)"
		demo "$DEMO_STOP_TIMEOUT" stop ||
			stop_rc=$?
		local p
		for p in "$PROXY_PORT" "$METRICS_PORT" "$DB_PORT"; do
			if port_in_use "$p"; then
				log "FAILED: 127.0.0.1:$p still accepts connections after scripts/demo.sh stop"
				stop_rc=1
			fi
		done
		if ((stop_rc != 0)); then
			log "FAILED: scripts/demo.sh stop did not stop everything (run dir $RUN_DIR)"
			((rc != 0)) || rc=1
		fi
	fi
	if ((rc == 0)); then
		# The data (the kept originals of the ADD INDEX jobs among it) takes
		# hundreds of MB; a failed check keeps it to look at.
		((!STARTED)) || rm -rf "$RUN_DIR/mariadb" "$RUN_DIR/proxy"
		log "OK: the quick start and the tour work, twice in a row"
	else
		log "FAILED (exit status $rc); proxy log: $RUN_DIR/proxy.log, MariaDB log: $RUN_DIR/mariadb/mariadb.log"
	fi
	exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- the quick start ------------------------------------------------------

log "scripts/demo.sh with run dir $RUN_DIR, MariaDB on 127.0.0.1:$DB_PORT, proxy on 127.0.0.1:$PROXY_PORT, metrics on 127.0.0.1:$METRICS_PORT"
STARTED=1
demo "$DEMO_START_TIMEOUT" start ||
	die "scripts/demo.sh failed (exit status $?)"

# --- the tour -------------------------------------------------------------

# sql USER TIMEOUT STATEMENTS: runs STATEMENTS in one session of USER (whose
# password is its name, as in the demo) in the database demo, and prints the
# rows tab-separated without headers.
sql() {
	local user=$1 limit=$2 stmts=$3 out rc=0
	out="$(timeout "$limit" mariadb --no-defaults --connect-timeout=10 -h 127.0.0.1 -P "$PROXY_PORT" \
		-u "$user" "-p$user" --batch --skip-column-names demo -e "$stmts" 2>&1)" || rc=$?
	if ((rc != 0)); then
		printf '%s\n' "$out" >&2
		((rc != 124)) || die "as $user, timed out after ${limit}s: $stmts"
		die "as $user, the mariadb client failed (exit status $rc): $stmts"
	fi
	printf '%s\n' "$out"
}

# show TITLE TEXT: echoes a step's result, indented.
show() {
	echo "  $1"
	[[ -z "$2" ]] || printf '%s\n' "$2" | sed 's/^/    /'
}

CACHED=(currencies exchange_rates branches)

# The demo caches its reference tables as it starts; a user who types fast may
# see their first reads go to MariaDB until the load ends. Wait for it.
wait_ready() {
	local deadline=$((SECONDS + READY_TIMEOUT)) states
	while :; do
		states="$(sql demo "$SQL_TIMEOUT" "SELECT table_name, state FROM tableproxy.cached_tables WHERE schema_name = 'demo' ORDER BY table_name")"
		local t ok=1
		for t in "${CACHED[@]}"; do
			grep -qxP "$t\tready" <<<"$states" || ok=0
		done
		((ok)) && return 0
		if grep -qP '\tfailed$' <<<"$states"; then
			sql admin "$SQL_TIMEOUT" "SELECT table_name, state, error FROM tableproxy.cached_tables" >&2 || true
			die "a cached table failed to load"
		fi
		((SECONDS < deadline)) || {
			printf '%s\n' "$states" >&2
			die "the cached tables ${CACHED[*]} were not all ready within ${READY_TIMEOUT}s"
		}
		sleep 0.2
	done
}

READ="SELECT quote, rate FROM exchange_rates WHERE base = 'USD' AND quote = 'EUR' ORDER BY id LIMIT 5"

# cached_read USER: the read twice, each followed by EXPLAIN LAST STATEMENT,
# in one session; the second must be answered from memory.
cached_read() {
	local user=$1 out explains rows second
	out="$(sql "$user" "$SQL_TIMEOUT" "$READ; EXPLAIN LAST STATEMENT; $READ; EXPLAIN LAST STATEMENT;")"
	# EXPLAIN LAST STATEMENT's rows have three columns, the read's two.
	explains="$(awk -F'\t' 'NF == 3' <<<"$out")"
	rows="$(awk -F'\t' 'NF == 2' <<<"$out" | wc -l)"
	show "$READ; EXPLAIN LAST STATEMENT (twice):" "$explains"
	[[ "$(wc -l <<<"$explains")" == 2 ]] || die "as $user, expected two rows of EXPLAIN LAST STATEMENT, got: $out"
	((rows == 10)) || die "as $user, expected 5 rows from each run of the read, got $rows in all: $out"
	second="$(sed -n 2p <<<"$explains" | cut -f2)"
	[[ "$second" == proxy ]] ||
		die "as $user, the read's second run was served_from '$second', not 'proxy': $(sed -n 2p <<<"$explains")"
}

cached_tables() {
	local user=$1 out t
	out="$(sql "$user" "$SQL_TIMEOUT" "SELECT table_name, state, row_count, hits FROM tableproxy.cached_tables ORDER BY table_name")"
	show "SELECT table_name, state, row_count, hits FROM tableproxy.cached_tables:" "$out"
	for t in "${CACHED[@]}"; do
		grep -qP "^$t\tready\t[1-9][0-9]*\t" <<<"$out" || die "as $user, tableproxy.cached_tables has no ready row for $t: $out"
	done
	grep -qP '^exchange_rates\tready\t[0-9]+\t[1-9]' <<<"$out" ||
		die "as $user, tableproxy.cached_tables counts no hits on exchange_rates after a read from memory: $out"
}

add_index() {
	local stmt=$1 t0=$SECONDS out
	out="$(sql admin "$ADD_INDEX_TIMEOUT" "$stmt; SHOW WARNINGS")"
	show "$stmt: ok in $((SECONDS - t0))s" "$out"
}

ddl_jobs() {
	local pass=$1 out done_jobs
	out="$(sql admin "$SQL_TIMEOUT" "ADMIN SHOW DDL JOBS")"
	[[ -n "$out" ]] || die "ADMIN SHOW DDL JOBS listed no job after two ADD INDEX"
	show "ADMIN SHOW DDL JOBS:" "$out"
	out="$(sql demo "$SQL_TIMEOUT" "SELECT state, COUNT(*) FROM tableproxy.ddl_jobs GROUP BY state ORDER BY state")"
	show "SELECT state, COUNT(*) FROM tableproxy.ddl_jobs GROUP BY state:" "$out"
	if grep -qvP '^done\t' <<<"$out"; then
		die "tableproxy.ddl_jobs has jobs that are not done: $out"
	fi
	done_jobs="$(awk -F'\t' '$1 == "done" { print $2 }' <<<"$out")"
	((${done_jobs:-0} == 2 * pass)) ||
		die "expected $((2 * pass)) done jobs in tableproxy.ddl_jobs after $pass runs of the tour, got ${done_jobs:-0}"
}

metrics() {
	local url="http://127.0.0.1:$METRICS_PORT/metrics" page
	if command -v curl >/dev/null 2>&1; then
		page="$(curl -sS -f --max-time "$METRICS_TIMEOUT" "$url")" || die "could not fetch $url"
	else
		page="$(timeout "$METRICS_TIMEOUT" bash -c '
			exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
			printf "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" >&3
			cat <&3' _ "$METRICS_PORT")" || die "could not fetch $url (bash /dev/tcp)"
		[[ "$(head -n 1 <<<"$page")" == *" 200 "* ]] || die "$url answered: $(head -n 1 <<<"$page")"
	fi
	show "curl -s $url | grep -E '^tableproxy_(cache_hits|statements|ddl_jobs)' (those not 0):" \
		"$(grep -E '^tableproxy_(cache_hits|statements|ddl_jobs)' <<<"$page" | grep -v ' 0$' || true)"
	grep -q '^tableproxy_' <<<"$page" || die "$url has no tableproxy_ metric"
}

wait_ready
for pass in 1 2; do
	echo
	echo "==> tour, run $pass of 2"
	echo " as demo:"
	cached_read demo
	cached_tables demo
	echo " as admin:"
	out="$(sql admin "$SQL_TIMEOUT" "ALTER TABLE branches CACHE")"
	show "ALTER TABLE branches CACHE (already cached: a no-op):" "$out"
	cached_read admin
	cached_tables admin
	add_index "ALTER TABLE audit_log ADD INDEX (actor, at)"
	add_index "ALTER TABLE audit_log ADD INDEX (at)"
	ddl_jobs "$pass"
	metrics
done
