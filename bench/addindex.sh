#!/usr/bin/env bash
# ADD INDEX benchmark: on one sysbench table (2M rows by default), adds the
# same index natively (ALTER TABLE directly on MariaDB), as a tableproxy job
# through the proxy (each copy method), and with pt-online-schema-change,
# side by side in one run, then the proxy job with 1, 2, 4 and 8 workers.
# Between runs the index is dropped again, so every run starts from the
# same table. Prints seconds and ratios, and writes them as Markdown to
# $TABLEPROXY_RUN_DIR/bench/addindex-<date>.md. See bench/README.md.
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
  --methods "..."   what to compare, in order (default: native proxy proxy-read-ahead pt-osc)
  --reuse           keep the table if it already has N rows (skips sysbench prepare)
  --proxy-bin PATH  use this binary instead of building bin/tableproxy
  -h, --help        show this help

Environment: TABLEPROXY_RUN_DIR and TABLEPROXY_MARIADB_PORT choose the private
MariaDB (scripts/mariadb.sh); TABLEPROXY_BENCH_PROXY_PORT the proxy's first port.
EOF
}

log() { printf 'addindex: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

ROWS=2000000 INDEX="INDEX idx_c (c)" WORKERS="1 2 4 8" METHODS="native proxy proxy-read-ahead pt-osc" REUSE=0 PROXY_BIN=""
while (($# > 0)); do
	case "$1" in
	--rows) ROWS="$2"; shift ;;
	--index) INDEX="$2"; shift ;;
	--workers) WORKERS="$2"; shift ;;
	--methods) METHODS="$2"; shift ;;
	--reuse) REUSE=1 ;;
	--proxy-bin) PROXY_BIN="$2"; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown option '$1'" ;;
	esac
	shift
done
[[ "$ROWS" =~ ^[1-9][0-9]*$ ]] || die "--rows needs a positive integer"
INDEX_NAME="$(sed -E 's/^(UNIQUE )?(INDEX|KEY) +`?([A-Za-z0-9_]+)`?.*/\3/I' <<<"$INDEX")"
[[ -n "$INDEX_NAME" && "$INDEX_NAME" != "$INDEX" ]] || die "--index must look like 'INDEX name (cols)'"

missing=()
command -v sysbench >/dev/null 2>&1 || missing+=(sysbench)
command -v mariadb >/dev/null 2>&1 || missing+=(mariadb-client)
if [[ " $METHODS " == *" pt-osc "* ]]; then
	command -v pt-online-schema-change >/dev/null 2>&1 || missing+=(percona-toolkit)
fi
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
	# The proxy's job follows the binary log as this user.
	sql+="GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'sbtest'@'$host';"
done
mysql_root -e "$sql" || die "cannot create $DB and its user"

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
printf '%s\n' "# Written by bench/addindex.sh." "plugins:" "  - name: ddloffload" \
	"    options: {old_table_retention: 0, binlog_user: sbtest}" >"$PROXY_CONFIG"
PROXY_LOG="$BENCH_DIR/proxy-addindex.log"
log "starting the proxy on $PROXY_ADDR (log $PROXY_LOG)"
"$PROXY_BIN" serve --config "$PROXY_CONFIG" --listen "$PROXY_ADDR" --backend "127.0.0.1:$DB_PORT" \
	--data-dir "$PROXY_DATA" --admin-user sbtest:sbtest </dev/null >"$PROXY_LOG" 2>&1 &
PROXY_PID=$!
deadline=$((SECONDS + READY_TIMEOUT))
until mariadb --no-defaults -h 127.0.0.1 -P "$port" -u sbtest -psbtest -e 'SELECT 1' >/dev/null 2>&1; do
	kill -0 "$PROXY_PID" 2>/dev/null || die "the proxy exited (log $PROXY_LOG)"
	((SECONDS < deadline)) || die "the proxy did not start (log $PROXY_LOG)"
	sleep 0.5
done

mysql_proxy() { mariadb --no-defaults -h 127.0.0.1 -P "$port" -u sbtest -psbtest --batch "$DB" "$@"; }

# timed NAME COMMAND...: runs COMMAND, prints its seconds, then drops the index.
timed() {
	local name=$1 t0 t1
	shift
	log "$name: adding $INDEX"
	t0=$(date +%s.%N)
	if ! "$@" >"$LOG_DIR/addindex-$name.log" 2>&1; then
		tail -n 20 "$LOG_DIR/addindex-$name.log" >&2
		die "$name failed (log $LOG_DIR/addindex-$name.log)"
	fi
	t1=$(date +%s.%N)
	mysql_root -N -e "SHOW CREATE TABLE $DB.sbtest1" | grep -q "KEY \`$INDEX_NAME\`" || die "$name: the index is missing afterwards"
	mysql_root -e "ALTER TABLE $DB.sbtest1 DROP INDEX $INDEX_NAME"
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }'
}

proxy_job() { mysql_proxy -e "$1 ALTER TABLE sbtest1 ADD $INDEX"; }

declare -A SECS
for m in $METHODS; do
	case "$m" in
	native) SECS[$m]=$(timed native mysql_root "$DB" -e "ALTER TABLE sbtest1 ADD $INDEX") ;;
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

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
DATE="$(date -u +%Y-%m-%d)"
OUT="$BENCH_DIR/addindex-$DATE.md"
{
	echo "ADD $INDEX on $DB.sbtest1: $ROWS rows, $TABLE_MB MB; $(nproc) CPUs, MariaDB $(mysql_root -N -e 'SELECT VERSION()'), $DATE"
	echo
	echo "| method | seconds | / native |"
	echo "|---|---|---|"
	for m in $METHODS; do
		echo "| $m | ${SECS[$m]} | $(ratio "${SECS[$m]}" "${SECS[native]:-0}") |"
	done
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
