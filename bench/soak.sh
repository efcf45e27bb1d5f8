#!/usr/bin/env bash
# A long soak of random distinct statements through one proxy with its
# defaults (bench/soak: reads of a cached table in ever-new shapes, long
# literal lists, prepared statements, writes, long user variables,
# refused statements, reconnects), sampling the proxy's resident memory:
# it must stay flat once the bounded caches have filled. Prints a line per
# sample and a verdict; exits 1 if memory grew.
#
#   bench/soak.sh [--duration 1h] [--clients 4] [--rate 300] [--sample 30s] [--proxy-bin PATH]
#
# Environment: TABLEPROXY_RUN_DIR, TABLEPROXY_MARIADB_PORT as for
# bench/run.sh; TABLEPROXY_BENCH_SOAK_PORT (6700): the proxy listens there,
# its metrics on + 1.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init soak
PORT="${TABLEPROXY_BENCH_SOAK_PORT:-6700}"
DURATION=1h CLIENTS=4 RATE=300 SAMPLE=30s PROXY_BIN=""
while (($#)); do
	case "$1" in
	--duration) DURATION="$2"; shift ;;
	--clients) CLIENTS="$2"; shift ;;
	--rate) RATE="$2"; shift ;;
	--sample) SAMPLE="$2"; shift ;;
	--proxy-bin) PROXY_BIN="$2"; shift ;;
	-h | --help) sed -n '2,13p' "$0"; exit 0 ;;
	*) die "unknown option $1" ;;
	esac
	shift
done
rm -rf "$BENCH_DIR"
mkdir -p "$BENCH_DIR"
bench_mariadb
sql="$(sbtest_sql)"
sql+="CREATE TABLE sbtest.soak_c (id INT PRIMARY KEY, k INT NOT NULL, c VARCHAR(100) NOT NULL, v INT NOT NULL, KEY k (k));"
sql+="CREATE TABLE sbtest.soak_p LIKE sbtest.soak_c;"
sql+="USE sbtest; INSERT INTO soak_c SELECT seq, seq % 100, CONCAT('row', seq), 0 FROM seq_1_to_2000;"
mysql_root -e "$sql" || die "could not create database sbtest"
if [[ -z "$PROXY_BIN" ]]; then
	(cd "$ROOT" && go build -o bin/tableproxy ./cmd/tableproxy)
	PROXY_BIN="$ROOT/bin/tableproxy"
fi
(cd "$ROOT" && go build -o "$BENCH_DIR/soak" ./bench/soak)
"$PROXY_BIN" serve --backend "127.0.0.1:$DB_PORT" --listen "127.0.0.1:$PORT" --user sbtest:sbtest \
	--admin-user sbtest:sbtest --data-dir "$BENCH_DIR/data" --metrics-listen "127.0.0.1:$((PORT + 1))" \
	>"$BENCH_DIR/proxy.log" 2>&1 &
PROXY_PID=$!
trap 'kill $PROXY_PID 2>/dev/null || true; wait 2>/dev/null || true' EXIT
for _ in $(seq 100); do
	mysql_at "$PORT" -e 'SELECT 1' >/dev/null 2>&1 && break
	sleep 0.1
done
mysql_at "$PORT" -e 'ALTER TABLE soak_c CACHE' || die "could not cache soak_c (see $BENCH_DIR/proxy.log)"
for _ in $(seq 100); do
	[[ "$(mysql_at "$PORT" -N -e "SELECT state FROM tableproxy.cached_tables WHERE table_name = 'soak_c'")" == ready ]] && break
	sleep 0.2
done
echo "## soak: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, proxy $(cd "$ROOT" && git rev-parse --short HEAD), MariaDB $(mysql_root -N -e 'SELECT VERSION()')"
"$BENCH_DIR/soak" -addr "127.0.0.1:$PORT" -pid "$PROXY_PID" -metrics "127.0.0.1:$((PORT + 1))" \
	-duration "$DURATION" -clients "$CLIENTS" -rate "$RATE" -sample "$SAMPLE"
