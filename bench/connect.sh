#!/usr/bin/env bash
# What a connect-heavy client costs through the proxy (a login, one
# statement, a close, over and over): bench/connloop against MariaDB
# directly, through the proxy and, with --compare-bin, through a second
# build, interleaved in one invocation. Through the proxy a login is the
# client's handshake with the proxy plus a pooled backend connection's
# hand-out (one COM_RESET_CONNECTION round trip), not a backend login.
#
#   bench/connect.sh [--time SEC] [--threads N] [--repeat N] [--proxy-bin PATH] [--compare-bin PATH]
#
# Environment: TABLEPROXY_RUN_DIR, TABLEPROXY_MARIADB_PORT as for
# bench/run.sh; TABLEPROXY_BENCH_CONNECT_PORT (6600): the proxies listen on
# that port + 1 and + 2.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init connect
BASE_PORT="${TABLEPROXY_BENCH_CONNECT_PORT:-6600}"
TIME=10 THREADS=8 REPEAT=3 PROXY_BIN="" COMPARE_BIN=""
while (($#)); do
	case "$1" in
	--time) TIME="$2"; shift ;;
	--threads) THREADS="$2"; shift ;;
	--repeat) REPEAT="$2"; shift ;;
	--proxy-bin) PROXY_BIN="$2"; shift ;;
	--compare-bin) COMPARE_BIN="$2"; shift ;;
	-h | --help) sed -n '2,14p' "$0"; exit 0 ;;
	*) die "unknown option $1" ;;
	esac
	shift
done
mkdir -p "$BENCH_DIR"
bench_mariadb
PORT="$DB_PORT"
sql="CREATE DATABASE IF NOT EXISTS sbtest;"
for host in 127.0.0.1 localhost; do
	sql+="CREATE USER IF NOT EXISTS 'sbtest'@'$host' IDENTIFIED VIA mysql_native_password USING PASSWORD('sbtest');"
	sql+="GRANT ALL ON sbtest.* TO 'sbtest'@'$host';"
done
mysql_root -e "$sql"
if [[ -z "$PROXY_BIN" ]]; then
	(cd "$ROOT" && go build -o bin/tableproxy ./cmd/tableproxy)
	PROXY_BIN="$ROOT/bin/tableproxy"
fi
(cd "$ROOT" && go build -o "$BENCH_DIR/connloop" ./bench/connloop)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
# start NAME BIN PORT: a proxy with its defaults in front of MariaDB.
start() {
	rm -rf "$BENCH_DIR/data-$1"
	"$2" serve --backend "127.0.0.1:$PORT" --listen "127.0.0.1:$3" --user sbtest:sbtest \
		--data-dir "$BENCH_DIR/data-$1" >"$BENCH_DIR/$1.log" 2>&1 &
	PIDS+=($!)
	for _ in $(seq 100); do
		mariadb -h 127.0.0.1 -P "$3" -u sbtest -psbtest -e 'SELECT 1' sbtest >/dev/null 2>&1 && return
		sleep 0.1
	done
	die "the $1 proxy did not start (see $BENCH_DIR/$1.log)"
}
TARGETS=(-addr "direct=127.0.0.1:$PORT")
start proxy "$PROXY_BIN" $((BASE_PORT + 1))
TARGETS+=(-addr "proxy=127.0.0.1:$((BASE_PORT + 1))")
if [[ -n "$COMPARE_BIN" ]]; then
	start compare "$COMPARE_BIN" $((BASE_PORT + 2))
	TARGETS+=(-addr "compare-bin=127.0.0.1:$((BASE_PORT + 2))")
fi
log "connect, SELECT 1, close; $THREADS threads, ${TIME}s per run, $REPEAT runs each, interleaved"
{
	echo "## connect-heavy: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, proxy $(cd "$ROOT" && git rev-parse --short HEAD)${COMPARE_BIN:+, compare-bin $COMPARE_BIN}"
	echo
	"$BENCH_DIR/connloop" "${TARGETS[@]}" -threads "$THREADS" -duration "${TIME}s" -repeat "$REPEAT"
} | tee "$BENCH_DIR/results-$(date -u +%Y%m%dT%H%M%SZ).md"
