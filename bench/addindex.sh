#!/usr/bin/env bash
# ADD INDEX benchmark: on one sysbench table (2M rows by default), adds the
# same index natively (ALTER TABLE directly on MariaDB), as the floor (the
# backend's own work for the job's design, by hand in one session: a
# chunked copy into a primary-key-only shadow, then the deferred build of
# its secondary indexes), as a tableproxy job through the proxy (each copy
# method), and with pt-online-schema-change, side by side in one run, then
# the proxy job with 1, 2, 4 and 8 workers. Between runs the index (or the
# floor's shadow) is dropped again, so every run starts from the same
# table. Prints seconds and ratios, and writes them as Markdown to
# $TABLEPROXY_RUN_DIR/bench/addindex-<date>.md. With --foreground, instead
# measures what a job costs sysbench oltp_read_write running through the
# proxy on the same table: p99 idle and during the job, errors, and whether
# any row was lost. See bench/README.md.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUN_DIR="${TABLEPROXY_RUN_DIR:-$ROOT/.run}"
mkdir -p "$RUN_DIR"
RUN_DIR="$(cd "$RUN_DIR" && pwd)"
BENCH_DIR="$RUN_DIR/bench"
LOG_DIR="$BENCH_DIR/logs"
DEFAULT_PROXY_PORT="${TABLEPROXY_BENCH_PROXY_PORT:-6034}"
READY_TIMEOUT=30

usage() {
	cat <<'EOF'
usage: bench/addindex.sh [options]

  --rows N          rows of the sysbench table (default 2000000)
  --index SQL       the index to add (default: INDEX idx_c (c))
  --workers "1 2 4 8"  worker counts for the scaling table (default: 1 2 4 8)
  --methods "..."   what to compare, in order (default: native floor proxy proxy-read-ahead
                    pt-osc); floor: one session copies the table into a key-only
                    shadow in chunks of the job's size, then builds its indexes
  --reuse           keep the table if it already has N rows (skips sysbench prepare)
  --proxy-bin PATH  use this binary instead of building bin/tableproxy
  -h, --help        show this help

  --foreground      instead: sysbench oltp_read_write through the proxy on the
                    table, idle, then while the proxy's job adds the index;
                    compares p99 latency, counts errors, checks for lost rows
  --threads N       with --foreground: sysbench threads (default 4)
  --idle-time SEC   with --foreground: seconds of the idle baseline (default 30)
  --job-vars SQL    with --foreground: SET statements run before the ALTER in its
                    session (e.g. "SET tableproxy_ddl_workers = 2;")
  --profile         with --foreground: a CPU profile of the proxy during the job
  --floor-hold SEC  with --foreground: before each pass, the floor: the proxy's job started
                    and paused at once for SEC seconds, then cancelled (its binary-log
                    stream and the keys it collects, no copy): what following the log
                    costs the foreground on this host
  --passes N        with --foreground: the proxy's job N times in one invocation (default 1),
                    each with its own idle part; the p99 ratio of each
                    With --replica too: the replica attached, the proxy's job holding its
                    copy for the replica's lag (--max-lag), then pt-online-schema-change
                    under the same foreground and lag limit; the replica's lag during
                    each, and its checksum against the primary's after each

  --replica         instead: a replica of the private MariaDB (scripts/mariadb.sh
                    replica, started from the primary's position, the bench's
                    schema only) and a light foreground (sysbench oltp_read_write
                    at --rate 50 through the proxy); native ALTER, then the
                    proxy's job with tableproxy_ddl_max_replica_lag = 2 and the
                    replica discovered; the replica's lag every 200 ms from a
                    heartbeat row, until it has caught up after each
  --max-lag SEC     with --replica: the job's tableproxy_ddl_max_replica_lag (default 2)

  --big             instead: the biggest-table run (with --rows 10000000: about 2.3 GB):
                    the proxy's job adds --index (here UNIQUE INDEX uk_c (c) unless
                    given, so the external sort spills) with no foreground; the
                    proxy's RSS and the job's row count and ETA are sampled every
                    second; the proxy is killed with kill -9 once in the copy (at
                    --kill-at percent of the rows) and once in the UNIQUE sort, and
                    restarted each time; reports the RSS above idle, the rows each
                    resume copied again (against one chunk per worker), the ETA's
                    error, and checks the rows and the index after. Not for CI.
  --kill-at PCT     with --big: where in the copy the first kill falls (default 40)
  --server-vars SQL SET GLOBAL statements run on MariaDB (as root) before anything
                    is measured; they last until the instance stops. Default: a
                    backend sized for the table, as a server holding a 430 MB table
                    on this machine would be: a 2 GB buffer pool (the table and its
                    shadow fit), a 1 GB redo log, innodb_io_capacity 1000 (an SSD).
                    "" keeps the private MariaDB's own settings (a 256 MB pool).
                    With --replica, the replica gets the same settings.
                    Either way the table is read once (warmed) before measuring.

Environment: TABLEPROXY_RUN_DIR and TABLEPROXY_MARIADB_PORT choose the private
MariaDB (scripts/mariadb.sh); TABLEPROXY_BENCH_PROXY_PORT the proxy's first port.
EOF
}

log() { printf 'addindex: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

ROWS=2000000 INDEX="INDEX idx_c (c)" WORKERS="1 2 4 8" METHODS="native floor proxy proxy-read-ahead pt-osc" REUSE=0 PROXY_BIN=""
FOREGROUND=0 FG_THREADS=4 IDLE_TIME=30 JOB_VARS="" PROFILE=0 REPLICA=0 MAX_LAG=2 BIG=0 KILL_AT=40 INDEX_GIVEN=0 PASSES=1 FLOOR_HOLD=0
# A backend sized for the table (see --server-vars); the buffer pool resizes
# in the background, which the sleep waits for.
SERVER_VARS="SET GLOBAL innodb_buffer_pool_size = 2147483648; SET GLOBAL innodb_log_file_size = 1073741824; SET GLOBAL innodb_io_capacity = 1000; DO SLEEP(5);"
ARGS="$*"
while (($# > 0)); do
	case "$1" in
	--rows) ROWS="$2"; shift ;;
	--index) INDEX="$2" INDEX_GIVEN=1; shift ;;
	--workers) WORKERS="$2"; shift ;;
	--methods) METHODS="$2"; shift ;;
	--reuse) REUSE=1 ;;
	--proxy-bin) PROXY_BIN="$2"; shift ;;
	--foreground) FOREGROUND=1 ;;
	--threads) FG_THREADS="$2"; shift ;;
	--idle-time) IDLE_TIME="$2"; shift ;;
	--job-vars) JOB_VARS="$2"; shift ;;
	--profile) PROFILE=1 ;;
	--replica) REPLICA=1 ;;
	--max-lag) MAX_LAG="$2"; shift ;;
	--passes) PASSES="$2"; shift ;;
	--floor-hold) FLOOR_HOLD="$2"; shift ;;
	--big) BIG=1 ;;
	--kill-at) KILL_AT="$2"; shift ;;
	--server-vars) SERVER_VARS="$2"; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown option '$1'" ;;
	esac
	shift
done
[[ "$ROWS" =~ ^[1-9][0-9]*$ ]] || die "--rows needs a positive integer"
[[ "$FG_THREADS" =~ ^[1-9][0-9]*$ ]] || die "--threads needs a positive integer"
[[ "$IDLE_TIME" =~ ^[1-9][0-9]*$ ]] || die "--idle-time needs a positive integer"
((FOREGROUND)) && METHODS="native"
[[ "$MAX_LAG" =~ ^[1-9][0-9]*$ ]] || die "--max-lag needs a positive integer"
[[ "$PASSES" =~ ^[1-9]$ ]] || die "--passes needs a number from 1 to 9"
[[ "$FLOOR_HOLD" =~ ^[0-9]+$ ]] || die "--floor-hold needs a number of seconds"
[[ "$KILL_AT" =~ ^[1-9][0-9]?$ ]] || die "--kill-at needs a percentage from 1 to 99"
((BIG && !INDEX_GIVEN)) && INDEX="UNIQUE INDEX uk_c (c)"
((BIG)) && METHODS="native"
((REPLICA)) && REUSE=0 # the replica starts from the primary's position: the table is made after it
INDEX_NAME="$(sed -E 's/^(UNIQUE )?(INDEX|KEY) +`?([A-Za-z0-9_]+)`?.*/\3/I' <<<"$INDEX")"
[[ -n "$INDEX_NAME" && "$INDEX_NAME" != "$INDEX" ]] || die "--index must look like 'INDEX name (cols)'"

missing=()
command -v sysbench >/dev/null 2>&1 || missing+=(sysbench)
command -v mariadb >/dev/null 2>&1 || missing+=(mariadb-client)
if [[ " $METHODS " == *" pt-osc "* ]] || ((FOREGROUND && REPLICA)); then
	command -v pt-online-schema-change >/dev/null 2>&1 || missing+=(percona-toolkit)
fi
((PROFILE || FOREGROUND)) && { command -v curl >/dev/null 2>&1 || missing+=(curl); }
if ((${#missing[@]} > 0)); then
	command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]}, and apt-get is unavailable"
	log "installing ${missing[*]} with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >/dev/null || die "apt-get update failed"
	apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null || die "apt-get install ${missing[*]} failed"
fi
command -v go >/dev/null 2>&1 || PATH="/usr/local/go/bin:$PATH"

STARTED_DB=0 PROXY_PID=""
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -n "$PROXY_PID" ]] && kill -0 "$PROXY_PID" 2>/dev/null; then
		kill -TERM "$PROXY_PID" 2>/dev/null || true
		wait "$PROXY_PID" 2>/dev/null || true
	fi
	if ((REPLICA)); then
		"$ROOT/scripts/mariadb.sh" replica stop || true
	fi
	if ((STARTED_DB)); then
		"$ROOT/scripts/mariadb.sh" stop || true
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$BENCH_DIR" "$LOG_DIR"
if ! "$ROOT/scripts/mariadb.sh" status >/dev/null 2>&1; then
	STARTED_DB=1
	"$ROOT/scripts/mariadb.sh" start
fi
# shellcheck disable=SC1091
source "$RUN_DIR/mariadb.env"
DB_PORT="${TABLEPROXY_TEST_BACKEND##*:}"
ROOT_USER="${TABLEPROXY_TEST_ROOT%%:*}"
ROOT_PASS="${TABLEPROXY_TEST_ROOT#*:}"
DB=sbtest_ai

mysql_root() { mariadb --no-defaults -h 127.0.0.1 -P "$DB_PORT" -u "$ROOT_USER" "-p$ROOT_PASS" --batch "$@"; }

sql="CREATE DATABASE IF NOT EXISTS $DB;"
for host in 127.0.0.1 localhost; do
	sql+="CREATE USER IF NOT EXISTS 'sbtest'@'$host' IDENTIFIED VIA mysql_native_password USING PASSWORD('sbtest');"
	sql+="GRANT ALL PRIVILEGES ON $DB.* TO 'sbtest'@'$host';"
	# The proxy's job follows the binary log as this user, and its cut-over
	# waits for the transactions open on the backend (PROCESS).
	sql+="GRANT REPLICATION SLAVE, REPLICATION CLIENT, PROCESS ON *.* TO 'sbtest'@'$host';"
done
mysql_root -e "$sql" || die "cannot create $DB and its user"
# Each run writes gigabytes of binary log (every job copies the table, and
# the foreground writes throughout); the replica, if any, starts from the
# primary's position anew, so no earlier log is needed: without this, runs
# with --reuse filled the disk in a day.
mysql_root -e "FLUSH BINARY LOGS; PURGE BINARY LOGS BEFORE NOW()" || die "cannot purge the binary logs"
if [[ -n "$SERVER_VARS" ]]; then
	log "server settings: $SERVER_VARS"
	mysql_root -e "$SERVER_VARS" || die "--server-vars failed"
fi
SERVER_SETTINGS="$(mysql_root -N -e "SELECT CONCAT('innodb_buffer_pool_size ', @@innodb_buffer_pool_size DIV 1048576, ' MB, innodb_log_file_size ', @@innodb_log_file_size DIV 1048576, ' MB, innodb_io_capacity ', @@innodb_io_capacity)")"

if ((REPLICA)); then
	mysql_root -e "DROP DATABASE IF EXISTS $DB; CREATE DATABASE $DB"
	for host in 127.0.0.1 localhost; do # SHOW SLAVE HOSTS, for the job's discovery
		mysql_root -e "GRANT REPLICATION MASTER ADMIN ON *.* TO 'sbtest'@'$host'"
	done
	TABLEPROXY_MARIADB_REPLICA_FROM=now TABLEPROXY_MARIADB_REPLICA_DO_TABLE="$DB.%" "$ROOT/scripts/mariadb.sh" replica start ||
		die "cannot start the replica"
	REPLICA_PORT="$("$ROOT/scripts/mariadb.sh" replica env | sed -n 's/^export TABLEPROXY_TEST_BACKEND=.*://p')"
	mysql_replica() { mariadb --no-defaults -h 127.0.0.1 -P "$REPLICA_PORT" -u "$ROOT_USER" "-p$ROOT_PASS" --batch "$@"; }
	mysql_replica -e "CREATE DATABASE IF NOT EXISTS $DB" # (made on the primary before the replica's start)
	# The replica sized as the primary: with the private instance's small
	# redo log, its own checkpoint flushes stall its applier for seconds
	# whatever the primary sends.
	if [[ -n "$SERVER_VARS" ]]; then
		mysql_replica -e "$SERVER_VARS" || die "--server-vars failed on the replica"
	fi
fi
have="$(mysql_root -N -e "SELECT COUNT(*) FROM $DB.sbtest1" 2>/dev/null || echo 0)"
if ((REUSE)) && [[ "$have" == "$ROWS" ]]; then
	log "reusing $DB.sbtest1 ($ROWS rows)"
else
	log "preparing $DB.sbtest1 with $ROWS rows (sysbench)"
	mysql_root -e "DROP DATABASE $DB; CREATE DATABASE $DB"
	sysbench oltp_read_write --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$DB_PORT" --mysql-user=sbtest \
		--mysql-password=sbtest --mysql-db="$DB" --tables=1 --table-size="$ROWS" prepare >"$LOG_DIR/addindex-prepare.log" 2>&1 ||
		die "sysbench prepare failed (log $LOG_DIR/addindex-prepare.log)"
fi
mysql_root -e "ALTER TABLE $DB.sbtest1 DROP INDEX IF EXISTS $INDEX_NAME; ANALYZE TABLE $DB.sbtest1" >/dev/null
# Every method starts from the table in the buffer pool (as much of it as fits).
mysql_root -e "SELECT COUNT(*) FROM $DB.sbtest1 FORCE INDEX (PRIMARY)" >/dev/null
TABLE_MB="$(mysql_root -N -e "SELECT ROUND((DATA_LENGTH + INDEX_LENGTH) / 1048576) FROM information_schema.TABLES WHERE TABLE_SCHEMA = '$DB' AND TABLE_NAME = 'sbtest1'")"

if [[ -z "$PROXY_BIN" ]]; then
	log "building bin/tableproxy"
	(cd "$ROOT" && go build -o bin/tableproxy ./cmd/tableproxy) || die "go build failed"
	PROXY_BIN="$ROOT/bin/tableproxy"
fi
port=$DEFAULT_PROXY_PORT
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
PROXY_ADDR="127.0.0.1:$port"
PROXY_DATA="$BENCH_DIR/proxy-data-addindex"
rm -rf "$PROXY_DATA"
mkdir -p "$PROXY_DATA"
PROXY_CONFIG="$BENCH_DIR/proxy-addindex.yaml"
((REPLICA)) && REPLICA_OPTS=", replicas: ['$ROOT_USER:$ROOT_PASS@discover']"
{
	printf '%s\n' "# Written by bench/addindex.sh." "plugins:" "  - name: ddloffload" \
		"    options: {strategy: backfill, old_table_retention: 0, binlog_user: sbtest${REPLICA_OPTS:-}}"
	# With --foreground, the metrics plugin counts the backend's errors by code.
	((FOREGROUND)) && printf '%s\n' "  - name: metrics"
} >"$PROXY_CONFIG"
PROXY_LOG="$BENCH_DIR/proxy-addindex.log"
PROXY_ARGS=()
if ((PROFILE || FOREGROUND)); then
	mport="${TABLEPROXY_BENCH_METRICS_PORT:-9105}"
	while (exec 3<>"/dev/tcp/127.0.0.1/$mport") 2>/dev/null; do mport=$((mport + 1)); done
	METRICS_ADDR="127.0.0.1:$mport"
	PPROF_ADDR="127.0.0.1:$((mport + 100))"
	PROXY_ARGS+=(--metrics-listen "$METRICS_ADDR" --pprof-listen "$PPROF_ADDR")
fi
# start_proxy starts the proxy (again, after a kill: the same data dir, so
# it resumes its jobs; its log is appended to) and waits until it answers.
start_proxy() {
	log "starting the proxy on $PROXY_ADDR (log $PROXY_LOG)"
	"$PROXY_BIN" serve --config "$PROXY_CONFIG" --listen "$PROXY_ADDR" --backend "127.0.0.1:$DB_PORT" \
		--data-dir "$PROXY_DATA" --admin-user sbtest:sbtest "${PROXY_ARGS[@]}" </dev/null >>"$PROXY_LOG" 2>&1 &
	PROXY_PID=$!
	echo "$PROXY_PID" >"$BENCH_DIR/proxy.pid" # for samplers running in subshells
	local deadline=$((SECONDS + READY_TIMEOUT))
	until mariadb --no-defaults -h 127.0.0.1 -P "$port" -u sbtest -psbtest -e 'SELECT 1' >/dev/null 2>&1; do
		kill -0 "$PROXY_PID" 2>/dev/null || die "the proxy exited (log $PROXY_LOG)"
		((SECONDS < deadline)) || die "the proxy did not start (log $PROXY_LOG)"
		sleep 0.5
	done
}
: >"$PROXY_LOG"
start_proxy

mysql_proxy() { mariadb --no-defaults -h 127.0.0.1 -P "$port" -u sbtest -psbtest --batch "$DB" "$@"; }

# timed NAME COMMAND...: runs COMMAND, prints its seconds, then drops the
# index (floor: checks the shadow, then drops it).
timed() {
	local name=$1 t0 t1 table=sbtest1
	shift
	[[ "$name" != floor ]] || table=$FLOOR_TABLE
	log "$name: adding $INDEX"
	t0=$(date +%s.%N)
	if ! "$@" >"$LOG_DIR/addindex-$name.log" 2>&1; then
		tail -n 20 "$LOG_DIR/addindex-$name.log" >&2
		die "$name failed (log $LOG_DIR/addindex-$name.log)"
	fi
	t1=$(date +%s.%N)
	mysql_root -N -e "SHOW CREATE TABLE $DB.$table" | grep -q "KEY \`$INDEX_NAME\`" || die "$name: the index is missing afterwards"
	if [[ "$name" == floor ]]; then
		floor_check
		mysql_root -e "DROP TABLE $DB.$FLOOR_TABLE"
	else
		mysql_root -e "ALTER TABLE $DB.sbtest1 DROP INDEX $INDEX_NAME"
	fi
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }'
}

proxy_job() { mysql_proxy -e "$1 ALTER TABLE sbtest1 ADD $INDEX"; }

# The floor: the backend's own work for the job's design (see the
# ARCHITECTURE notes, "ADD INDEX on MySQL/MariaDB"), without the job's
# walker, binary-log stream, checksums and cut-over. One session, under
# READ COMMITTED: CREATE TABLE ... LIKE the table, its secondary indexes
# dropped; INSERT ... SELECT ... ORDER BY id over primary-key ranges of the
# job's chunk size (tableproxy_ddl_batch_size), in key order; then one
# ALTER TABLE adding the table's secondary indexes and the new one, as the
# job's deferred build does. floor_sql writes that script (before the
# clock starts); the session prints when its copy starts, ends, and when
# the build ends, for the split.
FLOOR_TABLE=sbtest1_floor FLOOR_SQL="$BENCH_DIR/addindex-floor.sql"
floor_sql() {
	local chunk min max secondaries drops adds
	chunk="$(mysql_proxy -N -e "SELECT @@tableproxy_ddl_batch_size")"
	[[ "$chunk" =~ ^[1-9][0-9]*$ ]] || die "floor: cannot read the job's chunk size (got '$chunk')"
	read -r min max < <(mysql_root -N -e "SELECT MIN(id), MAX(id) FROM $DB.sbtest1")
	secondaries="$(mysql_root -N -e "SHOW CREATE TABLE $DB.sbtest1" | sed 's/\\n/\n/g' |
		sed -nE 's/^ *((UNIQUE )?KEY `[^`]+` .*[^,]),?$/\1/p')"
	drops="$(sed -E 's/^(UNIQUE )?KEY (`[^`]+`).*/DROP INDEX \2/' <<<"$secondaries" | paste -sd, -)"
	adds="$(sed 's/^/ADD /' <<<"$secondaries" | paste -sd, -)"
	FLOOR_CHUNK=$chunk FLOOR_DEFERRED=$(($(grep -c . <<<"$secondaries" || true) + 1))
	{
		echo "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; SET SESSION autocommit = 1;"
		echo "DROP TABLE IF EXISTS $FLOOR_TABLE; CREATE TABLE $FLOOR_TABLE LIKE sbtest1;"
		[[ -z "$secondaries" ]] || echo "ALTER TABLE $FLOOR_TABLE $drops;"
		echo "SELECT 'start', UNIX_TIMESTAMP(NOW(6));"
		awk -v lo="$((min - 1))" -v max="$max" -v n="$chunk" -v t="$FLOOR_TABLE" 'BEGIN {
			for (; lo < max; lo += n)
				printf "INSERT INTO %s SELECT * FROM sbtest1 WHERE id > %d AND id <= %d ORDER BY id;\n", t, lo, lo + n
		}'
		echo "SELECT 'copied', UNIX_TIMESTAMP(NOW(6));"
		echo "ALTER TABLE $FLOOR_TABLE ${adds:+$adds, }ADD $INDEX;"
		echo "SELECT 'built', UNIX_TIMESTAMP(NOW(6));"
	} >"$FLOOR_SQL"
}
floor_run() { mysql_root -N "$DB" <"$FLOOR_SQL"; }
# floor_check: the shadow holds every row and every index of the table.
floor_check() {
	local a b
	a="$(mysql_root -N -e "SELECT COUNT(*) FROM $DB.sbtest1")" b="$(mysql_root -N -e "SELECT COUNT(*) FROM $DB.$FLOOR_TABLE")"
	[[ "$a" == "$b" ]] || die "floor: the shadow has $b rows, the table $a"
	a="$(mysql_root -N -e "SELECT COUNT(DISTINCT INDEX_NAME) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = '$DB' AND TABLE_NAME = 'sbtest1'")"
	b="$(mysql_root -N -e "SELECT COUNT(DISTINCT INDEX_NAME) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = '$DB' AND TABLE_NAME = '$FLOOR_TABLE'")"
	((b == a + 1)) || die "floor: the shadow has $b indexes, the table $a plus the new one"
}
# floor_split: "copy X s + build Y s", from the floor session's log.
floor_split() {
	awk '$1 == "start" { s = $2 } $1 == "copied" { c = $2 } $1 == "built" { b = $2 }
		END { if (s && c && b) printf "copy %.2f s + build %.2f s", c - s, b - c }' "$LOG_DIR/addindex-floor.log"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
DATE="$(date -u +%Y-%m-%d)"

# rows_state prints what must not change while sysbench runs: its deletes
# re-insert the ids they delete, so the set of ids stays the same.
rows_state() { mysql_root -N -e "SELECT COUNT(*), MIN(id), MAX(id), COUNT(DISTINCT id) FROM $DB.sbtest1" | tr '\t' ' '; }

# sysbench_stat LOG FIELD N: the Nth (1-based) value of a line of sysbench's
# statistics ("95th percentile:", "ignored errors:", ...); each checkpoint
# report and the final report print one.
sysbench_stat() { grep -E "^ +$2" "$1" | sed -n "${3}p" | awk -F: '{ print $2 }' | awk '{ print $1 }'; }

# stage_breakdown prints, for each stage of the last proxy job, how the
# foreground fared while it ran: the seconds of sysbench's per-second
# reports that fall in it (the job started at the idle part's checkpoint),
# their mean tps and the median and highest of their p99s. The whole job's
# p99 is one percentile of all its transactions, so a stage whose seconds
# are slow shows here even when it is short.
stage_breakdown() {
	echo
	echo "| stage | s | tps | p99 ms, median of seconds | p99 ms, worst second |"
	echo "|---|---:|---:|---:|---:|"
	{
		grep 'ddl: stage done' "$PROXY_LOG" | tail -n 11 | sed -E 's/.*stage=([^ ]+) took=([^ ]+).*/stage \1 \2/'
		grep -E '^\[ [0-9]+s \]' "$1" | sed -E 's/^\[ ([0-9]+)s \].* tps: ([0-9.]+) .*lat \(ms,99%\): ([0-9.]+) .*/sec \1 \2 \3/'
	} | awk -v idle="$IDLE_TIME" '
		# Go durations: 1m2.5s, 830.2ms, 45µs.
		function secs(d, v, n, u) {
			v = 0
			while (match(d, /^[0-9.]+(h|m|s|ms|µs|us|ns)/)) {
				n = substr(d, 1, RLENGTH); d = substr(d, RLENGTH + 1)
				u = n; sub(/^[0-9.]+/, "", u); n += 0
				v += (u == "h") ? n * 3600 : (u == "m") ? n * 60 : (u == "s") ? n : (u == "ms") ? n / 1000 : n / 1e6
			}
			return v
		}
		$1 == "stage" { name[++ns] = $2; end[ns] = (ns > 1 ? end[ns - 1] : 0) + secs($3); next }
		$1 == "sec" && $2 > idle {
			mid = $2 - idle - 0.5
			for (i = 1; i <= ns && mid >= end[i]; i++) {}
			if (i > ns) next
			k = ++cnt[i]; tps[i] += $3; p[i, k] = $4
		}
		END {
			for (i = 1; i <= ns; i++) {
				n = cnt[i]
				if (n == 0) { printf "| %s | %.1f | - | - | - |\n", name[i], end[i] - (i > 1 ? end[i - 1] : 0); continue }
				for (a = 1; a <= n; a++) for (b = a + 1; b <= n; b++) if (p[i, b] < p[i, a]) { t = p[i, a]; p[i, a] = p[i, b]; p[i, b] = t }
				printf "| %s | %.1f | %.0f | %.2f | %.2f |\n", name[i], end[i] - (i > 1 ? end[i - 1] : 0), tps[i] / n, p[i, int((n + 1) / 2)], p[i, n]
			}
		}'
}

# fg_pass NAME COMMAND...: sysbench oltp_read_write through the proxy on
# the table being indexed, one run in two parts: IDLE_TIME seconds idle,
# ended by a checkpoint report (which resets sysbench's statistics), then
# while COMMAND adds the index; a stop file ends the run when COMMAND has
# answered, and the final report covers exactly the job. With --replica, a
# heartbeat row gives the replica's lag during the job. Leaves the pass's
# figures in FG[NAME,...].
declare -A FG
fg_pass() {
	local name=$1 stop="$BENCH_DIR/addindex-fg.stop" lua="$BENCH_DIR/addindex-fg.lua" sblog="$LOG_DIR/addindex-fg-$1-sysbench.log"
	local joblog="$LOG_DIR/addindex-fg-$1-job.log" samples="$LOG_DIR/addindex-fg-$1-threads.log" hb="$LOG_DIR/addindex-fg-$1.lag"
	local t0 t1 sbpid sampler="" curlpid="" beat="" rc=0 base after
	shift
	base="$(rows_state)"
	# A run of oltp_read_write whose event returns true, which ends the
	# thread, once the stop file exists (checked once a second).
	cat >"$lua" <<'LUA'
require("oltp_read_write")
local stop_file, run_event, checked, stop = os.getenv("ADDINDEX_STOP_FILE"), event, 0, false
function event(thread_id)
	run_event(thread_id)
	local now = os.time()
	if now ~= checked then
		checked = now
		local f = io.open(stop_file, "r")
		if f then f:close(); stop = true end
	end
	return stop
end
LUA
	rm -f "$stop"
	FG[$name,load0]="$(uptime | sed 's/.*load average: //')"
	# Every deadlock InnoDB detects during the run goes to the error log,
	# with both transactions' statements: a failed transaction can be told
	# apart (the job's, the cut-over's, or sysbench's own on hot rows).
	local mlog="$RUN_DIR/mariadb/mariadb.log" mlog0=0
	[[ -f "$mlog" ]] && mlog0=$(wc -c <"$mlog")
	mysql_root -e "SET GLOBAL innodb_print_all_deadlocks = ON"
	local errs0
	errs0="$(backend_errors)"
	log "$name: sysbench oltp_read_write through the proxy, $FG_THREADS threads: ${IDLE_TIME}s idle, then during the job"
	(cd /usr/share/sysbench && ADDINDEX_STOP_FILE="$stop" exec sysbench "$lua" --db-driver=mysql --mysql-host=127.0.0.1 \
		--mysql-port="$port" --mysql-user=sbtest --mysql-password=sbtest --mysql-db="$DB" --tables=1 --table-size="$ROWS" \
		--threads="$FG_THREADS" --time=3600 --percentile=99 --report-interval=1 --report-checkpoints="$IDLE_TIME" run) >"$sblog" 2>&1 &
	sbpid=$!
	until grep -q 'Checkpoint report' "$sblog"; do
		kill -0 "$sbpid" 2>/dev/null || { tail -n 20 "$sblog" >&2; die "$name: sysbench ended during the idle part (log $sblog)"; }
		sleep 0.2
	done
	(while sleep 1; do printf '%s %s\n' "$(date +%T)" "$(mysql_root -N -e "SHOW GLOBAL STATUS LIKE 'Threads_running'" | awk '{ print $2 }')"; done) >"$samples" 2>&1 &
	sampler=$!
	if ((REPLICA)); then
		mysql_root "$DB" -e "CREATE TABLE IF NOT EXISTS hb (id INT PRIMARY KEY, ts DATETIME(6) NOT NULL); REPLACE INTO hb VALUES (1, NOW(6))"
		(while :; do
			mysql_root "$DB" -e "UPDATE hb SET ts = NOW(6) WHERE id = 1"
			mysql_replica -N "$DB" -e "SELECT TIMESTAMPDIFF(MICROSECOND, ts, NOW(6)) / 1e6 FROM hb WHERE id = 1"
			sleep 0.2
		done) >"$hb" 2>/dev/null &
		beat=$!
	fi
	if ((PROFILE)) && [[ "$name" == proxy || "$name" == proxy-1 ]]; then
		curl -s -o "$BENCH_DIR/addindex-fg.pprof" "http://$PPROF_ADDR/debug/pprof/profile?seconds=10" &
		curlpid=$!
	fi
	log "$name: idle part done; adding $INDEX"
	t0=$(date +%s.%N)
	"$@" >"$joblog" 2>&1 || rc=$?
	t1=$(date +%s.%N)
	if ((REPLICA)); then # the replica's lag until it has applied the job
		local pos
		pos="$(mysql_root -N -e "SELECT @@gtid_binlog_pos")"
		mysql_replica -N -e "SELECT MASTER_GTID_WAIT('$pos', 600)" >/dev/null
		sleep 0.5
		kill "$beat" 2>/dev/null || true
		wait "$beat" 2>/dev/null || true
	fi
	touch "$stop"
	wait "$sbpid" || { tail -n 20 "$sblog" >&2; die "$name: sysbench failed (log $sblog)"; }
	kill "$sampler" 2>/dev/null || true
	wait "$sampler" 2>/dev/null || true
	[[ -z "$curlpid" ]] || wait "$curlpid" || true
	FG[$name,load1]="$(uptime | sed 's/.*load average: //')"
	mysql_root -e "SET GLOBAL innodb_print_all_deadlocks = OFF"
	local deadlocks=0
	if [[ -f "$mlog" ]]; then
		tail -c +"$((mlog0 + 1))" "$mlog" >"$LOG_DIR/addindex-fg-$name-deadlocks.log"
		deadlocks=$(grep -c 'Transactions deadlock detected' "$LOG_DIR/addindex-fg-$name-deadlocks.log" || true)
		if ((deadlocks > 0)); then
			log "$name: InnoDB deadlocks during the run: $deadlocks; their transactions' statements:"
			grep -E '^\*\*\* \([0-9]\)|^(UPDATE|DELETE|INSERT|SELECT|RENAME|LOCK TABLES|/\*)' "$LOG_DIR/addindex-fg-$name-deadlocks.log" | cut -c1-160 >&2 || true
		fi
	fi
	FG[$name,deadlocks]=$deadlocks
	FG[$name,codes]="$(errors_since "$errs0" "$(backend_errors)")"
	((rc == 0)) || { cat "$joblog" >&2; die "$name: the job failed (log $joblog)"; }
	FG[$name,job]=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	FG[$name,idle_p99]=$(sysbench_stat "$sblog" "99th percentile" 1)
	FG[$name,job_p99]=$(sysbench_stat "$sblog" "99th percentile" 2)
	FG[$name,idle_tps]=$(grep -E '^ +transactions:' "$sblog" | sed -n 1p | sed -E 's/.*\(([0-9.]+) per sec.*/\1/')
	FG[$name,job_tps]=$(grep -E '^ +transactions:' "$sblog" | sed -n 2p | sed -E 's/.*\(([0-9.]+) per sec.*/\1/')
	FG[$name,idle_err]=$(sysbench_stat "$sblog" "ignored errors" 1)
	FG[$name,job_err]=$(sysbench_stat "$sblog" "ignored errors" 2)
	FG[$name,idle_rc]=$(sysbench_stat "$sblog" "reconnects" 1)
	FG[$name,job_rc]=$(sysbench_stat "$sblog" "reconnects" 2)
	FG[$name,thr_max]=$(awk '$2 ~ /^[0-9]+$/ && $2 > m { m = $2 } END { print m + 0 }' "$samples")
	FG[$name,lag]=-
	((REPLICA)) && FG[$name,lag]=$(awk '$1 ~ /^[0-9.]+$/ && $1 > m { m = $1 } END { printf "%.2f", m + 0 }' "$hb")
	# Lost rows: the same ids, a clean table, and the new index holding
	# every row the primary key does.
	after="$(rows_state)"
	local check by_index=- by_pk verdict=ok indexed=1
	[[ "$name" == floor-* ]] && indexed=0 # the held job was cancelled: no index
	check="$(mysql_root -N -e "CHECK TABLE $DB.sbtest1" | awk -F'\t' '$3 == "status" { print $4 }')"
	by_pk="$(mysql_root -N -e "SELECT COUNT(*) FROM $DB.sbtest1 FORCE INDEX (PRIMARY)")"
	((indexed)) && by_index="$(mysql_root -N -e "SELECT COUNT(*) FROM $DB.sbtest1 FORCE INDEX ($INDEX_NAME)")"
	[[ "$after" == "$base" && "$check" == "OK" && ( "$by_index" == "$by_pk" || $indexed == 0 ) ]] || verdict=FAILED
	if ((REPLICA)); then # the replica: the index, and the primary's rows
		local a b
		mysql_replica -N -e "SELECT MASTER_GTID_WAIT('$(mysql_root -N -e "SELECT @@gtid_binlog_pos")', 600)" >/dev/null
		((indexed == 0)) || mysql_replica -N -e "SHOW CREATE TABLE $DB.sbtest1" | grep -q "KEY \`$INDEX_NAME\`" || verdict=FAILED
		a="$(mysql_root -N -e "CHECKSUM TABLE $DB.sbtest1" | awk '{ print $2 }')"
		b="$(mysql_replica -N -e "CHECKSUM TABLE $DB.sbtest1" | awk '{ print $2 }')"
		[[ "$a" == "$b" ]] || { verdict=FAILED; log "$name: the replica's checksum $b differs from the primary's $a"; }
	fi
	FG[$name,verdict]="$verdict (COUNT, MIN, MAX, COUNT(DISTINCT id) before: $base, after: $after; CHECK TABLE: $check; rows through $INDEX_NAME: $by_index, through PRIMARY: $by_pk$( ((REPLICA)) && echo "; the replica's checksum: ${b:-?}, the primary's: ${a:-?}"))"
	((indexed == 0)) || mysql_root -e "ALTER TABLE $DB.sbtest1 DROP INDEX $INDEX_NAME"
	[[ "$verdict" == ok ]] || die "$name: rows were lost or the table is damaged: ${FG[$name,verdict]}"
}

# backend_errors: the proxy's count of the backend's errors, by code.
backend_errors() { curl -s "http://$METRICS_ADDR/metrics" | awk '/^tableproxy_backend_errors_total/ { sub(/.*code="/, ""); sub(/"}/, ""); print $1, $2 }'; }

# errors_since BEFORE AFTER: the codes whose counts grew, with how much.
errors_since() {
	awk 'NR == FNR { b[$1] = $2; next } $2 > b[$1] { printf "%s%s: %d", sep, $1, $2 - b[$1]; sep = ", " }' <(printf '%s\n' "$1") <(printf '%s\n' "$2")
}

# held_job SEC: the proxy's job started (returning at once) and paused,
# for SEC seconds, then cancelled: the job's binary-log stream and the keys
# it collects, without its copy, which is the floor of what a job costs the
# foreground on this host.
held_job() {
	local id state
	id="$(mysql_proxy -N -e "SET tableproxy_ddl_async = ON; $JOB_VARS ALTER TABLE sbtest1 ADD $INDEX")"
	mysql_proxy -e "ADMIN PAUSE DDL JOBS $id"
	sleep "$1"
	mysql_proxy -e "ADMIN CANCEL DDL JOBS $id"
	for ((t = 0; t < 600; t++)); do
		state="$(mysql_proxy -N -e "SELECT state FROM tableproxy.ddl_jobs WHERE job_id = $id")"
		[[ "$state" == cancelled || "$state" == failed ]] && return 0
		sleep 0.1
	done
	echo "held_job: job $id still $state after its cancel" >&2
	return 1
}

# foreground: the native ALTER on the idle table for reference, then the
# proxy's job under the foreground (with --replica, holding its copy for
# the replica's lag) and, with --replica, pt-online-schema-change under the
# same foreground and the same lag limit; writes the report.
foreground() {
	local native passes="" name first i
	native=$(timed native mysql_root "$DB" -e "ALTER TABLE sbtest1 ADD $INDEX")
	log "native (idle): $native s"
	((REPLICA)) && mysql_proxy -e "SET GLOBAL tableproxy_ddl_max_replica_lag = $MAX_LAG"
	for ((i = 1; i <= PASSES; i++)); do
		if ((FLOOR_HOLD > 0)); then
			fg_pass "floor-$i" held_job "$FLOOR_HOLD"
			passes+="${passes:+ }floor-$i"
		fi
		name=proxy
		((PASSES == 1)) || name="proxy-$i"
		fg_pass "$name" mysql_proxy -e "$JOB_VARS ALTER TABLE sbtest1 ADD $INDEX"
		passes+="${passes:+ }$name"
	done
	first=${passes##*floor-1 }
	first=${first%% *}
	stage_breakdown "$LOG_DIR/addindex-fg-$name-sysbench.log" >"$BENCH_DIR/addindex-fg-stages.md" # the last pass's
	if ((REPLICA)); then
		passes+=" pt-osc"
		fg_pass pt-osc pt-online-schema-change --alter "ADD $INDEX" "h=127.0.0.1,P=$DB_PORT,u=$ROOT_USER,p=$ROOT_PASS,D=$DB,t=sbtest1" \
			--execute --recursion-method=hosts --max-lag="$MAX_LAG" --no-check-replication-filters --no-check-alter --alter-foreign-keys-method=auto
	fi
	OUT="$BENCH_DIR/addindex-foreground-$DATE.md"
	{
		echo "ADD $INDEX on $DB.sbtest1 during sysbench oltp_read_write through the proxy: $ROWS rows, $TABLE_MB MB;" \
			"$(nproc) CPUs, MariaDB $(mysql_root -N -e 'SELECT VERSION()'), $DATE, revision $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
		echo
		echo "Command: \`bench/addindex.sh $ARGS\`$( ((REPLICA)) && echo "; a replica attached (GTID, ROW), both jobs holding for its lag at $MAX_LAG s")"
		echo
		echo "MariaDB: $SERVER_SETTINGS"
		echo
		echo "| job | sysbench ($FG_THREADS threads) | seconds | tps | p99 ms | ignored errors | reconnects | p99 / idle | replica's largest lag, s | load before → after |"
		echo "|---|---|---|---|---|---|---|---|---|---|"
		local p
		for p in $passes; do
			echo "| $p | idle | $IDLE_TIME | ${FG[$p,idle_tps]} | ${FG[$p,idle_p99]} | ${FG[$p,idle_err]} | ${FG[$p,idle_rc]} | | | ${FG[$p,load0]} |"
			echo "| $p | during the job | ${FG[$p,job]} | ${FG[$p,job_tps]} | ${FG[$p,job_p99]} | ${FG[$p,job_err]} | ${FG[$p,job_rc]} | $(ratio "${FG[$p,job_p99]}" "${FG[$p,idle_p99]}") | ${FG[$p,lag]} | ${FG[$p,load1]} |"
		done
		echo
		echo "Target: the proxy job's p99 / idle at most 1.5, zero errors, no lost rows."
		if ((FLOOR_HOLD > 0)); then
			echo
			echo "The floor (floor-N: the job held, its binary-log stream only, $FLOOR_HOLD s), p99 / idle, pass by pass: $(for p in $passes; do [[ "$p" != floor-* ]] || printf '%s ' "$(ratio "${FG[$p,job_p99]}" "${FG[$p,idle_p99]}")"; done)"
		fi
		echo
		for p in $passes; do
			echo "- $p: backend errors seen by the proxy during the run, by code: ${FG[$p,codes]:-none}; InnoDB deadlocks: ${FG[$p,deadlocks]};" \
				"highest Threads_running during the job: ${FG[$p,thr_max]}; lost rows: ${FG[$p,verdict]}"
		done
		echo
		if ((PASSES > 1)); then
			echo "The proxy job's p99 / idle, pass by pass: $(for p in $passes; do [[ "$p" == pt-osc || "$p" == floor-* ]] || printf '%s ' "$(ratio "${FG[$p,job_p99]}" "${FG[$p,idle_p99]}")"; done)"
			echo
		fi
		echo "Job under load ($first): $(ratio "${FG[$first,job]}" "$native") x the native ALTER on the idle table ($native s)$( ((REPLICA)) && echo "; pt-online-schema-change under the same load: ${FG[pt-osc,job]} s ($(ratio "${FG[pt-osc,job]}" "${FG[$first,job]}") x the proxy job's)")"
		echo
		echo "The foreground during each stage of the proxy's job ($name):"
		cat "$BENCH_DIR/addindex-fg-stages.md"
	} | tee "$OUT"
	log "written to $OUT"
	log "the copy was throttled $(grep -c 'ddl: copy throttled' "$PROXY_LOG") times"
}

# big_table: the biggest-table run (--big). A sampler writes, every second,
# "seconds rss_kB stage row_count rows_estimated eta_seconds" while the
# proxy's job runs; the proxy is killed twice (in the copy, in the sort)
# and restarted on the same data dir, where it resumes the job.
big_table() {
	local samples="$LOG_DIR/addindex-big.samples" joblog="$LOG_DIR/addindex-big-job.log" t0 t1 idle sampler
	local chunk=5000 workers
	rss() { awk '/^VmRSS/ { print $2 }' "/proc/$(cat "$BENCH_DIR/proxy.pid")/status" 2>/dev/null || echo 0; }
	job_state() { mysql_proxy -N -e "SELECT stage, state, row_count, rows_estimated, eta_seconds FROM tableproxy.ddl_jobs ORDER BY job_id DESC LIMIT 1" 2>/dev/null | tr '\t' ' '; }
	workers="$(mysql_proxy -N -e "SHOW GLOBAL VARIABLES LIKE 'tableproxy_ddl_workers'" 2>/dev/null | awk '{ print $2 }')"
	sleep 5 # the proxy settles
	idle="$(rss)"
	log "big: $ROWS rows, $TABLE_MB MB; the proxy's idle RSS ${idle} kB; adding $INDEX through the proxy"
	t0=$(date +%s.%N)
	(mysql_proxy -e "ALTER TABLE sbtest1 ADD $INDEX" >"$joblog" 2>&1 || true) &
	(while :; do
		printf '%s %s %s\n' "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')" "$(rss)" "$(job_state)"
		sleep 1
	done) >"$samples" 2>/dev/null &
	sampler=$!
	# waits until the job's row matches the awk condition on "stage state rows estimate eta"
	wait_job() {
		local cond=$1 what=$2 st deadline=$((SECONDS + 7200))
		until st="$(job_state)" && [[ -n "$st" ]] && awk "{ exit !($cond) }" <<<"$st"; do
			((SECONDS < deadline)) || die "big: $what did not come (last: $st)"
			sleep 0.5
		done
		log "big: $what ($st)"
	}
	local restarted=0
	kill9() {
		log "big: kill -9 of the proxy ($1)"
		kill -KILL "$PROXY_PID"
		wait "$PROXY_PID" 2>/dev/null || true
		start_proxy
		[[ "$restarted" != 0 ]] || restarted=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') # the copy's restart
	}
	wait_job "\$1 == \"backfill\" && \$3 >= $ROWS * $KILL_AT / 100" "the copy at $KILL_AT%"
	kill9 "in the copy"
	wait_job "\$1 == \"sort\" || \$2 != \"running\" && \$2 != \"throttled\" && \$2 != \"paused\"" "the sort (or the job's end)"
	sleep 0.5
	local sort_killed=1
	[[ "$(job_state | awk '{ print $1 }')" == sort ]] || sort_killed=0
	((sort_killed)) && kill9 "in the sort"
	wait_job "\$2 != \"running\" && \$2 != \"throttled\" && \$2 != \"paused\"" "the job's end"
	t1=$(date +%s.%N)
	kill "$sampler" 2>/dev/null || true
	wait "$sampler" 2>/dev/null || true
	local state
	state="$(job_state | awk '{ print $2 }')"
	[[ "$state" == done ]] || die "big: the job ended $state: $(mysql_proxy -N -e "SELECT error FROM tableproxy.ddl_jobs ORDER BY job_id DESC LIMIT 1")"
	# The rows: every id once, the index over all of them, a clean table.
	local count by_index check again peak
	count="$(mysql_root -N -e "SELECT COUNT(*) FROM $DB.sbtest1 FORCE INDEX (PRIMARY)")"
	by_index="$(mysql_root -N -e "SELECT COUNT(*) FROM $DB.sbtest1 FORCE INDEX ($INDEX_NAME)")"
	check="$(mysql_root -N -e "CHECK TABLE $DB.sbtest1" | awk -F'\t' '$3 == "status" { print $4 }')"
	again="$(grep -o 'rows_copied_again=[0-9]*' "$PROXY_LOG" | cut -d= -f2 | paste -sd' ')"
	peak="$(awk '$2 > m { m = $2 } END { print m + 0 }' "$samples")"
	# The ETA's error: each sample of the copy from 5 s after the restart
	# in it (its rate settled) to 10 s before its end (the ETA is in whole
	# seconds) predicts the copy's end (its time + eta_seconds); the copy
	# ended at the first sample in a later stage.
	local eta_err
	eta_err="$(awk -v from="$((${restarted%.*} + 5))" '$3 == "backfill" && $1 >= from && $7 ~ /^[0-9]+$/ { t[++n] = $1; e[n] = $7 }
		$3 ~ /^(sort|catch-up|build|verify|cut-over|cleanup)$/ && !end { end = $1 }
		END {
			for (i = 1; i <= n; i++) {
				left = end - t[i]; if (left < 10) continue
				d = t[i] + e[i] - end; if (d < 0) d = -d
				if (d / left > w) w = d / left
				if (d > ws) ws = d
				m++
			}
			printf "%.0f%%, %.1f s at most (%d samples)", w * 100, ws, m
		}' "$samples")"
	local est_final
	est_final="$(awk '$3 == "backfill" { e = $6 } END { print e }' "$samples")"
	OUT="$BENCH_DIR/addindex-big-$DATE.md"
	{
		echo "ADD $INDEX on $DB.sbtest1 through the proxy, no foreground, the proxy killed (kill -9) in the copy and in the sort: $ROWS rows, $TABLE_MB MB;" \
			"$(nproc) CPUs, MariaDB $(mysql_root -N -e 'SELECT VERSION()'), $DATE, revision $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
		echo
		echo "Command: \`bench/addindex.sh $ARGS\`; MariaDB: $SERVER_SETTINGS; samples: $samples"
		echo
		echo "| measure | value |"
		echo "|---|---|"
		echo "| job, first statement to done, two restarts included | $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s |"
		echo "| proxy RSS idle / peak during the job / above idle (target ≤ 256 MB) | $((idle / 1024)) MB / $((peak / 1024)) MB / $(((peak - idle) / 1024)) MB |"
		echo "| rows copied again at each resume (bound: one chunk per worker, $chunk × $workers) | ${again:-none logged} |"
		echo "| killed in the sort | $( ((sort_killed)) && echo yes || echo 'no: the sort took under half a second') |"
		echo "| row_count at the end / rows in the table | $(job_state | awk '{ print $3 }') / $count |"
		echo "| rows_estimated during the copy | $est_final |"
		echo "| the ETA's largest error in the copy after its restart, as a share of the time left | $eta_err |"
		echo "| rows through $INDEX_NAME / through PRIMARY; CHECK TABLE | $by_index / $count; $check |"
	} | tee "$OUT"
	log "written to $OUT"
	[[ "$by_index" == "$count" && "$count" == "$ROWS" && "$check" == OK ]] || die "big: rows lost or the table damaged"
	mysql_root -e "ALTER TABLE $DB.sbtest1 DROP INDEX $INDEX_NAME"
}
if ((BIG)); then
	big_table
	exit 0
fi
if ((FOREGROUND)); then
	foreground
	exit 0
fi

# replica_lag NAME COMMAND...: runs COMMAND with a light foreground through
# the proxy and a heartbeat row written on the primary every 200 ms and read
# on the replica (one host, one clock), until the replica has caught up
# after it; prints the seconds COMMAND took and the replica's largest lag,
# and writes the lag over time to the log directory.
replica_lag() {
	local name=$1 t0 t1 hb sbpid beat pos
	hb="$LOG_DIR/addindex-replica-$name.lag"
	shift
	mysql_root "$DB" -e "CREATE TABLE IF NOT EXISTS hb (id INT PRIMARY KEY, ts DATETIME(6) NOT NULL); REPLACE INTO hb VALUES (1, NOW(6))"
	(cd /usr/share/sysbench && exec sysbench oltp_read_write --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$port" \
		--mysql-user=sbtest --mysql-password=sbtest --mysql-db="$DB" --tables=1 --table-size="$ROWS" --threads=2 --rate=50 \
		--time=3600 run) >"$LOG_DIR/addindex-replica-$name-sysbench.log" 2>&1 &
	sbpid=$!
	(t=0; while :; do
		mysql_root "$DB" -e "UPDATE hb SET ts = NOW(6) WHERE id = 1"
		printf '%s %s\n' "$t" "$(mysql_replica -N "$DB" -e "SELECT TIMESTAMPDIFF(MICROSECOND, ts, NOW(6)) / 1e6 FROM hb WHERE id = 1")"
		sleep 0.2; t=$(awk -v t="$t" 'BEGIN { printf "%.1f", t + 0.2 }')
	done) >"$hb" 2>/dev/null &
	beat=$!
	sleep 3 # the foreground's latency before the job
	log "$name: adding $INDEX with the replica attached"
	t0=$(date +%s.%N)
	"$@" >"$LOG_DIR/addindex-replica-$name.log" 2>&1 || { cat "$LOG_DIR/addindex-replica-$name.log" >&2; die "$name failed"; }
	t1=$(date +%s.%N)
	pos="$(mysql_root -N -e "SELECT @@gtid_binlog_pos")"
	[[ "$(mysql_replica -N -e "SELECT MASTER_GTID_WAIT('$pos', 600)")" == 0 ]] || die "$name: the replica did not catch up"
	sleep 1
	kill "$beat" "$sbpid" 2>/dev/null || true
	wait "$beat" "$sbpid" 2>/dev/null || true
	mysql_replica -N -e "SHOW CREATE TABLE $DB.sbtest1" | grep -q "KEY \`$INDEX_NAME\`" || die "$name: the replica has no index afterwards"
	local a b
	a="$(mysql_root -N -e "CHECKSUM TABLE $DB.sbtest1" | awk '{ print $2 }')"
	b="$(mysql_replica -N -e "CHECKSUM TABLE $DB.sbtest1" | awk '{ print $2 }')"
	[[ "$a" == "$b" ]] || die "$name: the replica's checksum $b differs from the primary's $a"
	mysql_root -e "ALTER TABLE $DB.sbtest1 DROP INDEX $INDEX_NAME"
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f ", b - a }'
	awk '$2 ~ /^[0-9.]+$/ && $2 > m { m = $2 } END { printf "%.2f\n", m + 0 }' "$hb"
}
if ((REPLICA)); then
	read -r native_s native_lag < <(replica_lag native mysql_root "$DB" -e "ALTER TABLE sbtest1 ADD $INDEX")
	mysql_proxy -e "SET GLOBAL tableproxy_ddl_max_replica_lag = $MAX_LAG"
	read -r job_s job_lag < <(replica_lag proxy mysql_proxy -e "ALTER TABLE sbtest1 ADD $INDEX")
	OUT="$BENCH_DIR/addindex-replica-$DATE.md"
	{
		echo "ADD $INDEX on $DB.sbtest1 with a replica attached (GTID, ROW, one SQL thread): $ROWS rows, $TABLE_MB MB; $(nproc) CPUs," \
			"MariaDB $(mysql_root -N -e 'SELECT VERSION()'), $DATE, revision $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
		echo
		echo "Command: \`bench/addindex.sh $ARGS\`; foreground: sysbench oltp_read_write, 2 threads, --rate 50, through the proxy"
		echo
		echo "| method | seconds on the primary | replica's largest lag, s (heartbeat) |"
		echo "|---|---|---|"
		echo "| native ALTER | $native_s | $native_lag |"
		echo "| proxy job, tableproxy_ddl_max_replica_lag = $MAX_LAG | $job_s | $job_lag |"
		echo
		echo "Target: the job's largest lag at most $MAX_LAG s ($(awk -v l="$job_lag" -v m="$MAX_LAG" 'BEGIN { print (l <= m) ? "met" : "not met" }'));" \
			"native's is about its ALTER's duration. Lag over time: $LOG_DIR/addindex-replica-{native,proxy}.lag;" \
			"the job's view: $(mysql_proxy -N -e "SELECT replica_lag_max_ms, lag_holds, lag_held_seconds FROM tableproxy.ddl_jobs ORDER BY job_id DESC LIMIT 1" |
				awk '{ printf "replica_lag_max_ms %s, lag_holds %s, lag_held_seconds %s", $1, $2, $3 }')"
	} | tee "$OUT"
	log "written to $OUT"
	"$ROOT/scripts/mariadb.sh" replica stop || true
	exit 0
fi

declare -A SECS
for m in $METHODS; do
	case "$m" in
	native) SECS[$m]=$(timed native mysql_root "$DB" -e "ALTER TABLE sbtest1 ADD $INDEX") ;;
	floor)
		floor_sql
		SECS[$m]=$(timed floor floor_run)
		;;
	proxy) SECS[$m]=$(timed proxy proxy_job "") ;;
	proxy-read-ahead) SECS[$m]=$(timed proxy-read-ahead proxy_job "SET tableproxy_ddl_copy_method = read_ahead;") ;;
	pt-osc) SECS[$m]=$(timed pt-osc pt-online-schema-change --alter "ADD $INDEX" "h=127.0.0.1,P=$DB_PORT,u=$ROOT_USER,p=$ROOT_PASS,D=$DB,t=sbtest1" \
		--execute --recursion-method=none --no-check-alter --alter-foreign-keys-method=auto) ;;
	*) die "unknown method '$m'" ;;
	esac
	log "$m: ${SECS[$m]} s"
done
declare -A WSECS
for w in $WORKERS; do
	WSECS[$w]=$(timed "proxy-workers-$w" proxy_job "SET tableproxy_ddl_workers = $w;")
	log "proxy, $w workers: ${WSECS[$w]} s"
done

OUT="$BENCH_DIR/addindex-$DATE.md"
{
	echo "ADD $INDEX on $DB.sbtest1: $ROWS rows, $TABLE_MB MB; $(nproc) CPUs, MariaDB $(mysql_root -N -e 'SELECT VERSION()'), $DATE"
	echo
	floor="${SECS[floor]:-}"
	echo "| method | seconds | / native |${floor:+ / floor |}"
	echo "|---|---|---|${floor:+---|}"
	for m in $METHODS; do
		echo "| $m | ${SECS[$m]} | $(ratio "${SECS[$m]}" "${SECS[native]:-0}") |${floor:+ $(ratio "${SECS[$m]}" "$floor") |}"
	done
	if [[ -n "$floor" ]]; then
		echo
		echo "floor: one session, $FLOOR_CHUNK-row chunks into a key-only shadow, then $FLOOR_DEFERRED deferred indexes: $(floor_split)"
		if [[ -n "${SECS[proxy]:-}" ]]; then
			r="$(ratio "${SECS[proxy]}" "${SECS[floor]}")"
			echo
			echo "proxy/floor: $r (target: at most 1.20, $(awk -v r="$r" 'BEGIN { print (r != "-" && r <= 1.2) ? "met" : "not met" }'))"
		fi
	fi
	if [[ -n "${SECS[pt-osc]:-}" && -n "${SECS[proxy]:-}" ]]; then
		echo
		echo "pt-online-schema-change / proxy job: $(ratio "${SECS[pt-osc]}" "${SECS[proxy]}")"
	fi
	echo
	echo "| proxy workers | seconds | / 1 worker |"
	echo "|---|---|---|"
	for w in $WORKERS; do
		echo "| $w | ${WSECS[$w]} | $(ratio "${WSECS[$w]}" "${WSECS[${WORKERS%% *}]}") |"
	done
} | tee "$OUT"
log "written to $OUT"
# The stages of the last proxy job, from its log.
grep 'ddl: stage done' "$PROXY_LOG" | tail -n 11 | sed -E 's/.*stage=([^ ]+) took=([^ ]+).*/  \1 \2/' >&2 || true
