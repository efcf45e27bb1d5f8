#!/usr/bin/env bash
# Benchmark harness: runs the same sysbench workloads directly against the
# private MariaDB and through tableproxy (and, with --floor, through a plain
# TCP relay as a reference), and prints the proxy/direct ratios. With --cache,
# the proxy runs with the cache plugin and answers covered reads of the sbtest
# tables from memory, and --floor also runs bench/floorserver, which replays
# recorded answers: the least any server can do per query; --latency puts a delaying relay in front of MariaDB and
# compares p95 latencies; --rw-cache compares oltp_read_write through the
# proxy with the tables cached and not cached.
# See bench/README.md for the options and how to read the results.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUN_DIR="${TABLEPROXY_RUN_DIR:-$ROOT/.run}"
mkdir -p "$RUN_DIR"
RUN_DIR="$(cd "$RUN_DIR" && pwd)"
BENCH_DIR="$RUN_DIR/bench"
LOG_DIR="$BENCH_DIR/logs"
COMMAND_LINE="bench/run.sh"
if (($# > 0)); then
	COMMAND_LINE+="$(printf ' %q' "$@")"
fi

DEFAULT_WORKLOADS="oltp_point_select oltp_read_only select_random_points select_random_ranges oltp_read_write"
QUICK_WORKLOADS="oltp_point_select oltp_read_write"
RW_WORKLOAD=oltp_read_write
DEFAULT_POINT_SELECTS="10 40 160 640"
# The first port tried for each listener (the next free one is used if it is
# taken); the environment can move them away from other instances.
DEFAULT_PROXY_PORT="${TABLEPROXY_BENCH_PROXY_PORT:-6034}"
DEFAULT_METRICS_PORT="${TABLEPROXY_BENCH_METRICS_PORT:-9105}"
DEFAULT_RELAY_PORT="${TABLEPROXY_BENCH_RELAY_PORT:-6044}"
DEFAULT_DELAY_PORT="${TABLEPROXY_BENCH_DELAY_PORT:-6054}"
DEFAULT_FLOORSRV_PORT="${TABLEPROXY_BENCH_FLOORSRV_PORT:-6064}"
PROFILE_SECONDS=15
READY_TIMEOUT=30
CACHE_TIMEOUT=60
STOP_TIMEOUT=20

usage() {
	cat <<'EOF'
usage: bench/run.sh [options]

Runs each sysbench workload directly against MariaDB and then through
tableproxy, and prints queries/s, p95 latency and the proxy/direct ratio.

  --quick               smoke test: oltp_point_select and oltp_read_write, 3 s per run,
                        without --floor
  --time SEC            seconds per run (default 20; 3 with --quick)
  --threads N           sysbench client threads (default 8)
  --tables N            number of sbtest tables (default 1)
  --table-size N        rows per table (default 5000)
  --workloads "a b"     sysbench workloads (default: oltp_point_select oltp_read_only
                        select_random_points select_random_ranges oltp_read_write)
  --ps "auto disable"   sysbench --db-ps-mode values to run (default: auto disable)
  --floor               also run each workload through bench/tcprelay, a plain TCP
                        relay, and print relay qps, relay/direct and proxy/relay;
                        with --cache, also run each workload against
                        bench/floorserver, which replays recorded answers, and
                        print floor qps and proxy/floor (default in a full run;
                        off with --quick or --direct-only)
  --no-floor            do not run the tcprelay and floorserver references
  --profile             capture a CPU profile of the proxy during each proxied run
                        into .run/bench/<workload>-<ps>.pprof (with --rw-cache:
                        <workload>-ps<N>-<ps>-<cached|uncached>.pprof)
  --cache               run the proxy with the cache plugin and cache every sbtest
                        table (ALTER TABLE ... CACHE) before the runs; prints
                        tableproxy.cached_tables before and after the runs, and
                        the cache hits and pass-throughs of each proxied run
  --latency             put bench/tcprelay -delay in front of MariaDB for both the
                        direct and the proxied runs (the proxy's backend is the
                        relay), cache the tables (implies --cache) and print the
                        proxy/direct p95 ratio; workloads default to
                        oltp_point_select, --repeat to 3
  --delay DUR           delay per direction for --latency (default 250us, i.e. a
                        0.5 ms round trip)
  --rate N              offer every run the same load: sysbench --rate=N, N
                        transactions per second in all (open loop: the latency
                        then includes the time a transaction waits for a free
                        thread). Compares latencies at one load rather than each
                        at its own saturation; give N below what every run can
                        sustain (a run that falls behind is reported as failed)
  --socket              connect sysbench over Unix sockets instead of loopback TCP:
                        to MariaDB's socket for the direct runs, to the proxy's
                        --listen-socket for the proxied ones (the proxy still
                        reaches MariaDB over TCP); turns off the default --floor
                        runs, and is not combined with --floor or --latency,
                        whose relays are TCP
  --rw-cache            oltp_read_write through the proxy only, with the sbtest
                        tables cached and not cached (ALTER TABLE ... NOCACHE),
                        alternating, for each --point-selects value; prints the
                        cached/uncached tps and qps ratios; --repeat defaults to 3.
                        With --compare-bin, also through the second proxy (its
                        tables cached and not cached alike), back to back with
                        the first in each state; prints the qps of both, the
                        cached/uncached ratio of each and the new/old ratios
  --point-selects "a b" oltp_read_write --point_selects values for --rw-cache
                        (default: 10 40 160 640)
  --repeat N            run every measurement N times (the direct and proxied
                        runs back to back each time) and print medians, with the
                        min-max range of the ratio (default 1)
  --listen ADDR         proxy listen address (default 127.0.0.1:6034, or the next
                        free port)
  --metrics-listen ADDR proxy metrics/pprof address (default 127.0.0.1:9105, or the
                        next free port)

Environment: TABLEPROXY_RUN_DIR and TABLEPROXY_MARIADB_PORT choose the private
MariaDB instance (see scripts/mariadb.sh); TABLEPROXY_BENCH_PROXY_PORT,
TABLEPROXY_BENCH_METRICS_PORT, TABLEPROXY_BENCH_RELAY_PORT,
TABLEPROXY_BENCH_DELAY_PORT and TABLEPROXY_BENCH_FLOORSRV_PORT the first ports
tried for the proxy, its metrics, the --floor relay, the --latency relay and
the --cache --floor floor server (defaults 6034, 9105, 6044, 6054, 6064).
  --proxy-bin PATH      benchmark this proxy binary instead of building bin/tableproxy
  --compare-bin PATH    also run each workload through this second proxy binary (an
                        older build, say), started as the first on its own port
                        right before each proxied run, and print its qps and
                        proxy/compare-bin; with --rw-cache, see there; not with
                        --cache, --latency or --socket
  --direct-only         only run against MariaDB (no proxy)
  -h, --help            show this help
EOF
}

log() { printf 'bench: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

need_value() { (($# >= 2)) || die "option $1 needs a value"; }
need_number() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "option $1 needs a positive integer, got '$2'"; }
need_addr() { [[ "$2" =~ ^127\.[0-9]+\.[0-9]+\.[0-9]+:[0-9]+$ ]] || die "option $1 needs a loopback host:port, got '$2'"; }

QUICK=0 PROFILE=0 SOCKET=0 DIRECT_ONLY=0 CACHE=0 FLOOR="" LATENCY=0 RW_CACHE=0
TIME="" THREADS="" RATE="" TABLES="" TABLE_SIZE="" WORKLOADS="" PS_MODES="" REPEAT="" DELAY="" POINT_SELECTS=""
PROXY_ADDR="" METRICS_ADDR="" PPROF_ADDR="" PROXY_BIN="" BASELINE_BIN="" BASELINE_PID="" BASELINE_PORT=""
while (($# > 0)); do
	case "$1" in
	--quick) QUICK=1 ;;
	--profile) PROFILE=1 ;;
	--cache) CACHE=1 ;;
	--latency) LATENCY=1 ;;
	--socket) SOCKET=1 ;;
	--rw-cache) RW_CACHE=1 ;;
	--delay) need_value "$@"; [[ "$2" =~ ^[0-9]+(\.[0-9]+)?(ns|us|µs|ms|s)$ ]] || die "--delay needs a duration such as 250us, got '$2'"; DELAY="$2"; shift ;;
	--repeat) need_value "$@"; need_number "$1" "$2"; REPEAT="$2"; shift ;;
	--point-selects) need_value "$@"; POINT_SELECTS="$2"; shift ;;
	--direct-only) DIRECT_ONLY=1 ;;
	--floor) FLOOR=1 ;;
	--no-floor) FLOOR=0 ;;
	--time) need_value "$@"; need_number "$1" "$2"; TIME="$2"; shift ;;
	--threads) need_value "$@"; need_number "$1" "$2"; THREADS="$2"; shift ;;
	--rate) need_value "$@"; need_number "$1" "$2"; RATE="$2"; shift ;;
	--tables) need_value "$@"; need_number "$1" "$2"; TABLES="$2"; shift ;;
	--table-size) need_value "$@"; need_number "$1" "$2"; TABLE_SIZE="$2"; shift ;;
	--workloads) need_value "$@"; WORKLOADS="$2"; shift ;;
	--ps) need_value "$@"; PS_MODES="$2"; shift ;;
	--listen) need_value "$@"; need_addr "$1" "$2"; PROXY_ADDR="$2"; shift ;;
	--metrics-listen) need_value "$@"; need_addr "$1" "$2"; METRICS_ADDR="$2"; shift ;;
	--proxy-bin) need_value "$@"; PROXY_BIN="$2"; shift ;;
	--compare-bin) need_value "$@"; BASELINE_BIN="$2"; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown option '$1'" ;;
	esac
	shift
done

for v in "$DEFAULT_PROXY_PORT" "$DEFAULT_METRICS_PORT" "$DEFAULT_RELAY_PORT" "$DEFAULT_DELAY_PORT" "$DEFAULT_FLOORSRV_PORT"; do
	[[ "$v" =~ ^[1-9][0-9]*$ ]] || die "TABLEPROXY_BENCH_*_PORT must be port numbers, got '$v'"
done

((SOCKET && LATENCY)) && die "--socket cannot be combined with --latency: its relay is TCP"
if [[ -n "$BASELINE_BIN" ]]; then
	# With --rw-cache, both proxies run with the cache plugin (CACHE is set
	# below) and each caches the tables itself.
	((LATENCY || SOCKET || DIRECT_ONLY || (CACHE && !RW_CACHE))) &&
		die "--compare-bin compares two proxies over TCP, uncached (or cached and not, with --rw-cache); it cannot be combined with --cache, --latency, --socket or --direct-only"
	[[ -x "$BASELINE_BIN" ]] || die "baseline binary $BASELINE_BIN is not executable"
fi
((LATENCY && RW_CACHE)) && die "--latency and --rw-cache are separate runs; give one of them"
if ((LATENCY || RW_CACHE)); then
	((DIRECT_ONLY)) && die "--latency and --rw-cache need the proxy; they cannot be combined with --direct-only"
	((${FLOOR:-0})) && die "--floor cannot be combined with --latency or --rw-cache"
	FLOOR=0
	CACHE=1
	: "${REPEAT:=3}"
fi
if ((LATENCY)); then
	: "${WORKLOADS:=oltp_point_select}" "${DELAY:=250us}"
elif [[ -n "$DELAY" ]]; then
	die "--delay only applies to --latency"
fi
if ((RW_CACHE)); then
	[[ -z "$WORKLOADS" ]] || die "--rw-cache always runs $RW_WORKLOAD; --workloads does not apply"
	WORKLOADS=$RW_WORKLOAD
	: "${POINT_SELECTS:=$DEFAULT_POINT_SELECTS}"
elif [[ -n "$POINT_SELECTS" ]]; then
	die "--point-selects only applies to --rw-cache"
fi
: "${REPEAT:=1}"

# Explicit options win over --quick, whatever their order on the command line.
if ((QUICK)); then
	: "${TIME:=3}" "${WORKLOADS:=$QUICK_WORKLOADS}" "${FLOOR:=0}"
fi
if ((DIRECT_ONLY)); then
	((${FLOOR:-0})) && die "--floor needs the proxy; it cannot be combined with --direct-only"
	FLOOR=0
fi
if ((SOCKET)); then
	((${FLOOR:-0})) && die "--socket cannot be combined with --floor: its relay is TCP"
	FLOOR=0
fi
: "${FLOOR:=1}"
# The floor server stands in for a proxy that answers every read from memory,
# so it is only a reference for the cached runs.
FLOORSRV=0
((FLOOR && CACHE)) && FLOORSRV=1
: "${TIME:=20}" "${THREADS:=8}" "${TABLES:=1}" "${TABLE_SIZE:=5000}"
: "${WORKLOADS:=$DEFAULT_WORKLOADS}" "${PS_MODES:=auto disable}"

read -r -a WORKLOAD_LIST <<<"$WORKLOADS"
read -r -a PS_LIST <<<"$PS_MODES"
((${#WORKLOAD_LIST[@]} > 0)) || die "--workloads is empty"
((${#PS_LIST[@]} > 0)) || die "--ps is empty"
for ps in "${PS_LIST[@]}"; do
	[[ "$ps" == auto || "$ps" == disable ]] || die "--ps values must be 'auto' or 'disable', got '$ps'"
done
for w in "${WORKLOAD_LIST[@]}"; do
	[[ "$w" =~ ^[A-Za-z0-9_]+$ ]] || die "invalid workload name '$w'"
done
read -r -a POINT_SELECTS_LIST <<<"${POINT_SELECTS:-}"
for n in "${POINT_SELECTS_LIST[@]}"; do
	need_number --point-selects "$n"
done
if ((RW_CACHE)); then
	((${#POINT_SELECTS_LIST[@]} > 0)) || die "--point-selects is empty"
fi
if ((DIRECT_ONLY && PROFILE)); then
	die "--profile needs the proxy; it cannot be combined with --direct-only"
fi
if ((DIRECT_ONLY && CACHE)); then
	die "--cache needs the proxy; it cannot be combined with --direct-only"
fi

# --- tools ---------------------------------------------------------------

install_packages() {
	command -v apt-get >/dev/null 2>&1 || die "missing $*, and apt-get is unavailable to install it"
	log "installing $* with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >/dev/null || die "apt-get update failed"
	apt-get install -y -q --no-install-recommends "$@" >/dev/null || die "apt-get install $* failed"
}

missing=()
command -v sysbench >/dev/null 2>&1 || missing+=(sysbench)
command -v mariadb >/dev/null 2>&1 || missing+=(mariadb-client)
if ((PROFILE)); then
	command -v curl >/dev/null 2>&1 || missing+=(curl)
fi
((${#missing[@]} == 0)) || install_packages "${missing[@]}"
for w in "${WORKLOAD_LIST[@]}"; do
	[[ -f "/usr/share/sysbench/$w.lua" ]] || command -v "$w" >/dev/null 2>&1 ||
		die "unknown sysbench workload '$w' (see /usr/share/sysbench)"
done

if ((FLOOR || LATENCY)) || { ((!DIRECT_ONLY)) && [[ -z "$PROXY_BIN" ]]; }; then
	command -v go >/dev/null 2>&1 || [[ -x /usr/local/go/bin/go ]] ||
		die "Go is required to build the proxy, bench/tcprelay and bench/floorserver: install Go and put 'go' on PATH (or pass --proxy-bin --no-floor)"
	command -v go >/dev/null 2>&1 || PATH="/usr/local/go/bin:$PATH"
fi

port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Prints the first free loopback port from $1 on.
free_port() {
	local port
	for ((port = $1; port < $1 + 100; port++)); do
		if ! port_in_use "$port"; then
			echo "$port"
			return 0
		fi
	done
	die "no free loopback port in $1..$(($1 + 99))"
}

# --- cleanup -------------------------------------------------------------

STARTED_DB=0
PROXY_PID=""
RELAY_PID=""
DELAY_PID=""
FLOORSRV_PID=""
PROFILE_PID=""

# stop_process PID NAME: SIGTERM, then SIGKILL after STOP_TIMEOUT seconds.
stop_process() {
	local pid=$1 name=$2 deadline
	[[ -n "$pid" ]] || return 0
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		deadline=$((SECONDS + STOP_TIMEOUT))
		while kill -0 "$pid" 2>/dev/null; do
			if ((SECONDS >= deadline)); then
				log "$name did not exit within ${STOP_TIMEOUT}s; killing it"
				kill -KILL "$pid" 2>/dev/null || true
				break
			fi
			sleep 0.2
		done
	fi
	wait "$pid" 2>/dev/null || true
}

stop_proxy() {
	stop_process "$PROXY_PID" proxy
	PROXY_PID=""
	stop_process "$BASELINE_PID" "baseline proxy"
	BASELINE_PID=""
}

stop_relay() {
	stop_process "$RELAY_PID" tcprelay
	RELAY_PID=""
	stop_process "$DELAY_PID" "tcprelay -delay"
	DELAY_PID=""
	stop_process "$FLOORSRV_PID" floorserver
	FLOORSRV_PID=""
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -n "$PROFILE_PID" ]]; then
		kill "$PROFILE_PID" 2>/dev/null || true
	fi
	stop_proxy
	stop_relay
	if ((STARTED_DB)); then
		"$ROOT/scripts/mariadb.sh" stop || true
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- backend -------------------------------------------------------------

mkdir -p "$BENCH_DIR" "$LOG_DIR"

# Leave an instance that was already running as it was.
if ! "$ROOT/scripts/mariadb.sh" status >/dev/null 2>&1; then
	STARTED_DB=1
	"$ROOT/scripts/mariadb.sh" start
fi
# shellcheck disable=SC1091
source "$RUN_DIR/mariadb.env"
DB_PORT="${TABLEPROXY_TEST_BACKEND##*:}"
ROOT_USER="${TABLEPROXY_TEST_ROOT%%:*}"
ROOT_PASS="${TABLEPROXY_TEST_ROOT#*:}"

mysql_root() {
	mariadb --no-defaults -h 127.0.0.1 -P "$DB_PORT" -u "$ROOT_USER" "-p$ROOT_PASS" --batch "$@"
}

MARIADB_VERSION="$(mysql_root -N -e 'SELECT VERSION()')" || die "cannot query the MariaDB version"

log "creating database sbtest and user sbtest"
sql="DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest;"
for host in 127.0.0.1 localhost; do
	sql+="CREATE USER IF NOT EXISTS 'sbtest'@'$host' IDENTIFIED VIA mysql_native_password USING PASSWORD('sbtest');"
	sql+="ALTER USER 'sbtest'@'$host' IDENTIFIED VIA mysql_native_password USING PASSWORD('sbtest');"
	sql+="GRANT ALL PRIVILEGES ON sbtest.* TO 'sbtest'@'$host';"
	if ((CACHE)); then
		# The cache plugin follows the binary log as the admin who cached the
		# tables, to see writes that bypass the proxy.
		sql+="GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'sbtest'@'$host';"
	fi
done
mysql_root -e "$sql" || die "could not create database sbtest / user sbtest"

SB_COMMON=(--db-driver=mysql --mysql-host=127.0.0.1 --mysql-user=sbtest --mysql-password=sbtest
	--mysql-db=sbtest --tables="$TABLES" --table-size="$TABLE_SIZE")

log "preparing $TABLES table(s) of $TABLE_SIZE rows"
if ! sysbench oltp_read_write "${SB_COMMON[@]}" --mysql-port="$DB_PORT" prepare >"$LOG_DIR/prepare.log" 2>&1; then
	tail -n 30 "$LOG_DIR/prepare.log" >&2
	die "sysbench prepare failed (log: $LOG_DIR/prepare.log)"
fi

# --- relays --------------------------------------------------------------

RELAY_BIN="$BENCH_DIR/tcprelay"
RELAY_BUILT=0

# wait_ready PID ADDR LOG NAME: waits until the relay or proxy at ADDR answers
# sbtest.
wait_ready() {
	local pid=$1 addr=$2 plog=$3 name=$4 deadline=$((SECONDS + READY_TIMEOUT))
	until mariadb --no-defaults -h "${addr%:*}" -P "${addr##*:}" -u sbtest -psbtest \
		--connect-timeout=2 sbtest -e 'SELECT 1' >/dev/null 2>&1; do
		if ! kill -0 "$pid" 2>/dev/null; then
			tail -n 30 "$plog" >&2 || true
			die "$name exited during startup (log: $plog)"
		fi
		((SECONDS < deadline)) || {
			tail -n 30 "$plog" >&2 || true
			die "$name did not accept connections within ${READY_TIMEOUT}s"
		}
		sleep 0.5
	done
}

# start_relay NAME PORT LOG [tcprelay flags]: starts bench/tcprelay on
# 127.0.0.1:PORT in front of MariaDB, waits until a query passes through it,
# and sets STARTED_PID.
start_relay() {
	local name=$1 port=$2 logfile=$3 deadline
	shift 3
	if ((!RELAY_BUILT)); then
		log "building bench/tcprelay"
		(cd "$ROOT" && go build -o "$RELAY_BIN" ./bench/tcprelay) || die "go build ./bench/tcprelay failed"
		RELAY_BUILT=1
	fi
	log "starting $name on 127.0.0.1:$port (log $logfile)"
	"$RELAY_BIN" -listen "127.0.0.1:$port" -target "127.0.0.1:$DB_PORT" "$@" \
		</dev/null >"$logfile" 2>&1 &
	STARTED_PID=$!
	wait_ready "$STARTED_PID" "127.0.0.1:$port" "$logfile" "$name"
}

# With --latency, the direct runs and the proxy's backend connections both go
# through a relay that delays every chunk by DELAY in each direction: a
# stand-in for a network between the clients and MariaDB.
DIRECT_PORT="$DB_PORT"
DELAY_PORT=""
if ((LATENCY)); then
	DELAY_PORT="$(free_port "$DEFAULT_DELAY_PORT")"
	DELAY_LOG="$BENCH_DIR/tcprelay-delay.log"
	start_relay "tcprelay -delay $DELAY" "$DELAY_PORT" "$DELAY_LOG" -delay "$DELAY"
	DELAY_PID=$STARTED_PID
	DIRECT_PORT="$DELAY_PORT"
fi

# --- proxy ---------------------------------------------------------------

PROXY_PORT=""
if ((!DIRECT_ONLY)); then
	if [[ -z "$PROXY_BIN" ]]; then
		log "building bin/tableproxy"
		(cd "$ROOT" && go build -o bin/tableproxy ./cmd/tableproxy) || die "go build ./cmd/tableproxy failed"
		PROXY_BIN="$ROOT/bin/tableproxy"
	fi
	[[ -x "$PROXY_BIN" ]] || die "proxy binary $PROXY_BIN is not executable"

	if [[ -n "$PROXY_ADDR" ]]; then
		port_in_use "${PROXY_ADDR##*:}" && die "proxy address $PROXY_ADDR is already in use"
	else
		PROXY_ADDR="127.0.0.1:$(free_port "$DEFAULT_PROXY_PORT")"
	fi
	if [[ -n "$METRICS_ADDR" ]]; then
		port_in_use "${METRICS_ADDR##*:}" && die "metrics address $METRICS_ADDR is already in use"
	else
		METRICS_ADDR="127.0.0.1:$(free_port "$DEFAULT_METRICS_PORT")"
	fi
	PROXY_PORT="${PROXY_ADDR##*:}"
	PROXY_LOG="$BENCH_DIR/proxy.log"
	PPROF_ADDR="127.0.0.1:$(free_port $((${METRICS_ADDR##*:} + 100)))"
	PROXY_ARGS=(--listen "$PROXY_ADDR" --backend "127.0.0.1:$DIRECT_PORT" --metrics-listen "$METRICS_ADDR" --pprof-listen "$PPROF_ADDR")
	PROXY_SOCKET=""
	if ((SOCKET)); then
		PROXY_SOCKET="$BENCH_DIR/proxy.sock"
		PROXY_ARGS+=(--listen-socket "$PROXY_SOCKET")
	fi
	if ((CACHE)); then
		# A fresh data directory: the proxy keeps the list of cached tables
		# there, and sbtest has just been recreated.
		PROXY_DATA="$BENCH_DIR/proxy-data-cache"
		rm -rf "$PROXY_DATA"
		# With a plugins section, metrics must be listed to stay on as it is
		# without --cache; it comes first so that it also counts the
		# statements the cache answers.
		PROXY_CONFIG="$BENCH_DIR/proxy-cache.yaml"
		printf '%s\n' "# Written by bench/run.sh --cache." "plugins:" "  - name: metrics" "  - name: cache" \
			>"$PROXY_CONFIG"
		PROXY_ARGS+=(--config "$PROXY_CONFIG" --admin-user sbtest:sbtest)
		log "proxy config: $PROXY_CONFIG (cache plugin; sbtest is a proxy admin)"
	else
		PROXY_DATA="$BENCH_DIR/proxy-data"
		PROXY_ARGS+=(--user sbtest:sbtest)
	fi
	mkdir -p "$PROXY_DATA"
	PROXY_ARGS+=(--data-dir "$PROXY_DATA")

	log "starting the proxy on $PROXY_ADDR (metrics $METRICS_ADDR, log $PROXY_LOG)"
	"$PROXY_BIN" serve "${PROXY_ARGS[@]}" </dev/null >"$PROXY_LOG" 2>&1 &
	PROXY_PID=$!
	wait_ready "$PROXY_PID" "$PROXY_ADDR" "$PROXY_LOG" "the proxy"

	if [[ -n "$BASELINE_BIN" ]]; then
		# The same arguments but for its own addresses and data directory.
		BASELINE_ADDR="127.0.0.1:$(free_port $((${PROXY_ADDR##*:} + 1)))"
		BASELINE_METRICS="127.0.0.1:$(free_port $((${METRICS_ADDR##*:} + 1)))"
		BASELINE_DATA="$BENCH_DIR/proxy-data-baseline"
		if ((CACHE)); then
			# Fresh, as the first proxy's: it keeps its own list of cached
			# tables there.
			BASELINE_DATA="$BENCH_DIR/proxy-data-baseline-cache"
			rm -rf "$BASELINE_DATA"
		fi
		BASELINE_LOG="$BENCH_DIR/proxy-baseline.log"
		mkdir -p "$BASELINE_DATA"
		BASELINE_ARGS=()
		for ((i = 0; i < ${#PROXY_ARGS[@]}; i++)); do
			a="${PROXY_ARGS[i]}"
			if [[ "$a" == --pprof-listen ]]; then
				i=$((i + 1)) # (profiles are of the proxy under test; an older build lacks the flag)
				continue
			fi
			BASELINE_ARGS+=("$a")
			case "$a" in
			--listen) BASELINE_ARGS+=("$BASELINE_ADDR") && i=$((i + 1)) ;;
			--metrics-listen) BASELINE_ARGS+=("$BASELINE_METRICS") && i=$((i + 1)) ;;
			--data-dir) BASELINE_ARGS+=("$BASELINE_DATA") && i=$((i + 1)) ;;
			esac
		done
		BASELINE_PORT="${BASELINE_ADDR##*:}"
		log "starting the baseline proxy $BASELINE_BIN on $BASELINE_ADDR (log $BASELINE_LOG)"
		"$BASELINE_BIN" serve "${BASELINE_ARGS[@]}" </dev/null >"$BASELINE_LOG" 2>&1 &
		BASELINE_PID=$!
		wait_ready "$BASELINE_PID" "$BASELINE_ADDR" "$BASELINE_LOG" "the --compare-bin proxy"
	fi
fi

# --- cached tables -------------------------------------------------------

# The proxy answers tableproxy.cached_tables itself.
CACHED_TABLES_SQL="SELECT table_name, state, row_count, memory_bytes, load_ms, version, hits, pass_throughs, invalidation FROM tableproxy.cached_tables WHERE schema_name = 'sbtest'"

# mysql_at ADDR ARGS...: the mariadb client as sbtest through the proxy
# listening on ADDR (host:port); mysql_proxy: through the proxy.
mysql_at() {
	local addr=$1
	shift
	mariadb --no-defaults -h "${addr%:*}" -P "${addr##*:}" -u sbtest -psbtest \
		--connect-timeout=5 --batch sbtest "$@"
}
mysql_proxy() { mysql_at "$PROXY_ADDR" "$@"; }

# proxy_target [baseline]: sets addr, pid, plog and name (locals of the
# caller) to the proxy's, or with "baseline" to the --compare-bin proxy's.
proxy_target() {
	if [[ "${1:-}" == baseline ]]; then
		addr=$BASELINE_ADDR pid=$BASELINE_PID plog=$BASELINE_LOG name="the --compare-bin proxy"
	else
		addr=$PROXY_ADDR pid=$PROXY_PID plog=$PROXY_LOG name="the proxy"
	fi
}

# print_tsv: mariadb --batch output (a header line, then rows) as aligned
# columns; text columns left-aligned, numbers right-aligned.
print_tsv() {
	awk -F'\t' '
		{ for (i = 1; i <= NF; i++) { cell[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i)
			if (NR > 1 && $i !~ /^-?[0-9.]+$/) text[i] = 1 }
		  if (NF > nf) nf = NF }
		END {
			for (r = 1; r <= NR; r++) {
				line = ""
				for (i = 1; i <= nf; i++) {
					f = (text[i] || NR == 1) ? "%-" w[i] "s" : "%" w[i] "s"
					line = line (i > 1 ? "  " : "") sprintf(f, cell[r, i])
				}
				sub(/ +$/, "", line)
				print line
			}
		}'
}

# markdown_tsv: the same as a Markdown table.
markdown_tsv() {
	awk -F'\t' '
		{ line = "|"; for (i = 1; i <= NF; i++) line = line " " $i " |"; print line }
		NR == 1 { line = "|"; for (i = 1; i <= NF; i++) line = line "---|"; print line }'
}

# cache_counts [ADDR]: the sum of hits and of pass_throughs over the sbtest
# tables of the proxy (or of the one at ADDR), or nothing if it does not
# answer.
cache_counts() {
	mysql_at "${1:-$PROXY_ADDR}" -N -e "SELECT hits, pass_throughs FROM tableproxy.cached_tables WHERE schema_name = 'sbtest'" 2>/dev/null |
		awk '{ h += $1; p += $2 } END { if (NR > 0) print h, p }' || true
}

# cache_tables [baseline]: ALTER TABLE sbtestN CACHE for every table through
# the proxy (or the --compare-bin proxy), then waits until every table is
# ready in its tableproxy.cached_tables.
cache_tables() {
	local i out addr pid plog name
	proxy_target "${1:-}"
	log "caching $TABLES table(s) through $name: ALTER TABLE sbtestN CACHE"
	for ((i = 1; i <= TABLES; i++)); do
		if ! out="$(mysql_at "$addr" -e "ALTER TABLE sbtest$i CACHE" 2>&1)"; then
			printf '    %s\n' "$out" >&2
			die "ALTER TABLE sbtest$i CACHE through $name failed (proxy log: $plog)"
		fi
	done
	wait_cache_ready "${1:-}"
}

# wait_cache_ready [baseline]: waits until every table is ready in the
# proxy's (or the --compare-bin proxy's) tableproxy.cached_tables.
wait_cache_ready() {
	local states ready cache_start deadline addr pid plog name
	proxy_target "${1:-}"
	log "waiting up to ${CACHE_TIMEOUT}s until every table is ready in tableproxy.cached_tables${1:+ of $name}"
	cache_start=$SECONDS
	deadline=$((SECONDS + CACHE_TIMEOUT))
	while :; do
		states="$(mysql_at "$addr" -N -e "SELECT state FROM tableproxy.cached_tables WHERE schema_name = 'sbtest'" 2>/dev/null || true)"
		ready="$(grep -cx ready <<<"$states" || true)"
		((ready == TABLES)) && break
		if grep -qx failed <<<"$states" || ((SECONDS >= deadline)) || ! kill -0 "$pid" 2>/dev/null; then
			mysql_at "$addr" -e "SELECT table_name, state, error FROM tableproxy.cached_tables WHERE schema_name = 'sbtest'" 2>&1 |
				print_tsv >&2 || true
			tail -n 20 "$plog" >&2 || true
			die "$ready of $TABLES table(s) ready in tableproxy.cached_tables${1:+ of $name} after $((SECONDS - cache_start))s (proxy log: $plog)"
		fi
		sleep 0.5
	done
}

# uncache_tables [baseline]: ALTER TABLE sbtestN NOCACHE for every table
# through the proxy (or the --compare-bin proxy); afterwards its
# tableproxy.cached_tables has no sbtest row.
uncache_tables() {
	local i out left addr pid plog name
	proxy_target "${1:-}"
	log "uncaching $TABLES table(s) through $name: ALTER TABLE sbtestN NOCACHE"
	for ((i = 1; i <= TABLES; i++)); do
		if ! out="$(mysql_at "$addr" -e "ALTER TABLE sbtest$i NOCACHE" 2>&1)"; then
			printf '    %s\n' "$out" >&2
			die "ALTER TABLE sbtest$i NOCACHE through $name failed (proxy log: $plog)"
		fi
	done
	left="$(mysql_at "$addr" -N -e "SELECT table_name FROM tableproxy.cached_tables WHERE schema_name = 'sbtest'")" ||
		die "cannot read tableproxy.cached_tables${1:+ of $name} after NOCACHE"
	[[ -z "$left" ]] || die "tableproxy.cached_tables${1:+ of $name} still lists ${left//$'\n'/ } after NOCACHE"
}

# With --rw-cache --compare-bin, the second proxy is a cluster of its own
# with the cache plugin: it caches the tables itself, as the first does.
RW_COMPARE=0
((RW_CACHE)) && [[ -n "$BASELINE_BIN" ]] && RW_COMPARE=1

CACHE_BEFORE="" CACHE_AFTER="" BASELINE_CACHE_BEFORE="" BASELINE_CACHE_AFTER=""
if ((CACHE)); then
	cache_tables
	CACHE_BEFORE="$(mysql_proxy -e "$CACHED_TABLES_SQL")" || die "cannot read tableproxy.cached_tables"
	echo
	echo "tableproxy.cached_tables before the runs:"
	print_tsv <<<"$CACHE_BEFORE"
	echo
	if ((RW_COMPARE)); then
		cache_tables baseline
		BASELINE_CACHE_BEFORE="$(mysql_at "$BASELINE_ADDR" -e "$CACHED_TABLES_SQL")" ||
			die "cannot read tableproxy.cached_tables of the --compare-bin proxy"
		echo "tableproxy.cached_tables of the --compare-bin proxy before the runs:"
		print_tsv <<<"$BASELINE_CACHE_BEFORE"
		echo
	fi
fi

# --- floor reference -----------------------------------------------------

# bench/tcprelay forwards bytes with io.Copy and does nothing else; running
# sysbench through it shows what any userspace relay costs on this machine.
RELAY_PORT=""
if ((FLOOR)); then
	# Chosen after the proxy is listening, so the two never pick the same port.
	RELAY_PORT="$(free_port "$DEFAULT_RELAY_PORT")"
	RELAY_LOG="$BENCH_DIR/tcprelay.log"
	start_relay tcprelay "$RELAY_PORT" "$RELAY_LOG"
	RELAY_PID=$STARTED_PID
fi

# bench/floorserver forwards each statement shape to MariaDB once and then
# answers every statement of that shape with the recorded packets, in one
# write after one read: the least any MySQL-protocol server can do per query
# here, and so the floor of a read answered from the proxy's cache.
FLOORSRV_PORT=""
if ((FLOORSRV)); then
	FLOORSRV_BIN="$BENCH_DIR/floorserver"
	FLOORSRV_LOG="$BENCH_DIR/floorserver.log"
	log "building bench/floorserver"
	(cd "$ROOT" && go build -o "$FLOORSRV_BIN" ./bench/floorserver) || die "go build ./bench/floorserver failed"
	FLOORSRV_PORT="$(free_port "$DEFAULT_FLOORSRV_PORT")"
	log "starting floorserver on 127.0.0.1:$FLOORSRV_PORT (log $FLOORSRV_LOG)"
	"$FLOORSRV_BIN" -listen "127.0.0.1:$FLOORSRV_PORT" -backend "127.0.0.1:$DB_PORT" \
		-user sbtest -password sbtest -db sbtest </dev/null >"$FLOORSRV_LOG" 2>&1 &
	FLOORSRV_PID=$!
	wait_ready "$FLOORSRV_PID" "127.0.0.1:$FLOORSRV_PORT" "$FLOORSRV_LOG" floorserver
fi

# --- runs ----------------------------------------------------------------

# Field value from a sysbench report, e.g. queries per second from
#   queries:                             160000 (31992.65 per sec.)
sb_field() {
	local file=$1 what=$2
	case "$what" in
	qps) awk '$1 == "queries:" { gsub(/\(/, "", $3); print $3; exit }' "$file" ;;
	queries) awk '$1 == "queries:" { print $2; exit }' "$file" ;;
	tps) awk '$1 == "transactions:" { gsub(/\(/, "", $3); print $3; exit }' "$file" ;;
	p95) awk '/95th percentile:/ { print $3; exit }' "$file" ;;
	errors) awk '/ignored errors:/ { print $3; exit }' "$file" ;;
	reconnects) awk '$1 == "reconnects:" { print $2; exit }' "$file" ;;
	writes) awk '$1 == "write:" { print $2; exit }' "$file" ;;
	esac
}

FAILURES=()
NOTES=()
ROWS=()
CACHE_ROWS=()

# cpu_ticks PID: the process's user+system CPU time so far, in clock ticks
# (0 when there is no such process).
cpu_ticks() {
	local stat
	if [[ -n "$1" ]] && stat="$(cat "/proc/$1/stat" 2>/dev/null)"; then
		# Fields after the command name, which is in parentheses and may hold
		# spaces: utime and stime are the 12th and 13th of them.
		stat="${stat##*) }"
		awk '{ print $12 + $13 }' <<<"$stat"
	else
		echo 0
	fi
}

# children_ticks: sets R_CHILD_TICKS to the user+system CPU time of this
# shell's finished children, in clock ticks. The times builtin must run in
# this shell itself (a subshell starts from zero), so it writes to a file.
children_ticks() {
	times >"$LOG_DIR/.times"
	R_CHILD_TICKS="$(tail -n 1 "$LOG_DIR/.times" | awk -v hz="$CLK_TCK" '{
		n = 0
		for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); n += a[1] * 60 + a[2] }
		printf "%.0f", n * hz
	}')"
}
CLK_TCK="$(getconf CLK_TCK)"

# cpu_per_query TICKS QUERIES: microseconds of CPU per query.
cpu_per_query() {
	awk -v t="$1" -v q="$2" -v hz="$CLK_TCK" 'BEGIN { if (q > 0) printf "%.1f", t / hz * 1e6 / q; else print "-" }'
}

# run_sysbench WORKLOAD PS TARGET PORT [SUFFIX [SYSBENCH ARGS...]]: runs one
# measurement and sets R_QPS, R_TPS, R_P95 and R_QUERIES (empty when the run
# failed). SUFFIX ends the log file's name (e.g. the repetition).
run_sysbench() {
	local workload=$1 ps=$2 target=$3 port=$4 suffix=${5:-}
	shift 4
	(($# > 0)) && shift
	local out="$LOG_DIR/$workload-$ps-$target$suffix.log"
	local rc=0 errors reconnects writes
	R_QPS="" R_TPS="" R_P95="" R_QUERIES=""
	printf 'bench: %-22s ps=%-8s %-6s %s... ' "$workload" "$ps" "$target" "${suffix:+($suffix) }" >&2
	# CPU time of sysbench, MariaDB and the proxy over the run, to say
	# where each query's time goes on a machine they share.
	local db_pid proxy_pid="${PROXY_PID:-}" proxy_name=proxy sb0 db0 px0 idle_pid="" id0
	db_pid="$(tr -dc '0-9' <"$RUN_DIR/mariadb/mariadb.pid" 2>/dev/null || true)"
	case "$target" in
	direct | relay | nodelay) proxy_pid="" ;;
	baseline | baseline-*) proxy_pid="$BASELINE_PID" ;;
	floor) proxy_pid="$FLOORSRV_PID" proxy_name=floorserver ;;
	esac
	# With --rw-cache --compare-bin, the proxy that is not measured keeps
	# following the binary log, and with cached tables reloads them after
	# the writes of the run: its CPU time is reported too.
	if ((RW_COMPARE)); then
		idle_pid="$BASELINE_PID"
		[[ $proxy_pid == "$BASELINE_PID" ]] && idle_pid="$PROXY_PID"
	fi
	children_ticks
	sb0="$R_CHILD_TICKS" db0="$(cpu_ticks "$db_pid")" px0="$(cpu_ticks "$proxy_pid")" id0="$(cpu_ticks "$idle_pid")"
	# With --socket, the runs that would reach MariaDB's or the proxy's port
	# use its Unix socket (libmysqlclient takes the socket for "localhost").
	local to=(--mysql-port="$port")
	if ((SOCKET)); then
		case "$port" in
		"$DB_PORT") to=(--mysql-host=localhost --mysql-socket="$TABLEPROXY_MARIADB_SOCKET") ;;
		"$PROXY_PORT") to=(--mysql-host=localhost --mysql-socket="$PROXY_SOCKET") ;;
		esac
	fi
	timeout --kill-after=10 $((TIME + 60)) sysbench "$workload" "${SB_COMMON[@]}" \
		"${to[@]}" --threads="$THREADS" --time="$TIME" --report-interval=0 \
		--percentile=95 --db-ps-mode="$ps" ${RATE:+--rate="$RATE"} "$@" run >"$out" 2>&1 || rc=$?
	children_ticks
	R_CPU_SB=$((R_CHILD_TICKS - sb0)) R_CPU_DB=$(($(cpu_ticks "$db_pid") - db0)) R_CPU_PX=$(($(cpu_ticks "$proxy_pid") - px0))
	R_CPU_IDLE=$(($(cpu_ticks "$idle_pid") - id0))
	R_QPS="$(sb_field "$out" qps)"
	R_TPS="$(sb_field "$out" tps)"
	R_P95="$(sb_field "$out" p95)"
	R_QUERIES="$(sb_field "$out" queries)"
	errors="$(sb_field "$out" errors)"
	reconnects="$(sb_field "$out" reconnects)"
	writes="$(sb_field "$out" writes)"

	local problem=""
	if ((rc != 0)); then
		problem="sysbench exited with status $rc"
	elif [[ -z "$R_QPS" ]]; then
		problem="no queries/s figure in the sysbench output"
	elif awk -v q="$R_QPS" 'BEGIN { exit !(q <= 0) }'; then
		problem="0 queries/s"
	elif [[ "${errors:-0}" != 0 && "${writes:-0}" == 0 ]]; then
		problem="$errors errors"
	elif [[ "${reconnects:-0}" != 0 ]]; then
		problem="$reconnects reconnects"
	elif [[ -n "$RATE" ]] && awk -v t="$R_TPS" -v r="$RATE" 'BEGIN { exit !(t < 0.97 * r) }'; then
		# Below the offered rate, the queue grew for the whole run and its
		# latency says how long the run was, not how fast the path is.
		problem="$R_TPS transactions/s, behind the offered --rate $RATE"
	fi
	if [[ -n "$problem" ]]; then
		echo "FAILED ($problem)" >&2
		tail -n 15 "$out" | sed 's/^/    /' >&2
		FAILURES+=("$workload ps=$ps $target$suffix: $problem (log: $out)")
		R_QPS="" R_TPS="" R_P95="" R_QUERIES=""
		return 0
	fi
	# Without --mysql-ignore-errors, sysbench aborts on any error except
	# deadlocks and lock wait timeouts (1213, 1205, 1020), which it retries and
	# counts as "ignored errors". Those are normal for write workloads on a
	# small table, directly and through the proxy alike, so they are reported
	# rather than failing the run; read-only workloads must have none.
	if [[ "${errors:-0}" != 0 ]]; then
		NOTES+=("$workload ps=$ps $target$suffix: $errors deadlock/lock-wait retries")
	fi
	printf '%s qps, %s tps, p95 %s ms\n' "$R_QPS" "$R_TPS" "$R_P95" >&2
	local cpu="sysbench $(cpu_per_query "$R_CPU_SB" "$R_QUERIES"), MariaDB $(cpu_per_query "$R_CPU_DB" "$R_QUERIES")"
	[[ -n "$proxy_pid" ]] && cpu+=", $proxy_name $(cpu_per_query "$R_CPU_PX" "$R_QUERIES")"
	[[ -n "$idle_pid" ]] && cpu+=", idle other proxy $(cpu_per_query "$R_CPU_IDLE" "$R_QUERIES")"
	CPU_ROWS+=("$workload|$ps|$target$suffix|$cpu")
}
CPU_ROWS=()

ratio() {
	if [[ -n "$1" && -n "$2" ]]; then
		awk -v d="$1" -v p="$2" 'BEGIN { if (d > 0) printf "%.2f", p / d; else print "-" }'
	else
		echo "-"
	fi
}

# median VALUES...: the median of the numeric values given ("-" and empty
# values are left out), or "-" if there is none.
median() {
	printf '%s\n' "$@" | awk '$1 ~ /^[0-9.]+$/' | sort -g |
		awk '{ a[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print a[(NR + 1) / 2]; else printf "%.2f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# spread VALUES...: "min-max" of the numeric values given, or "-".
spread() {
	printf '%s\n' "$@" | awk '$1 ~ /^[0-9.]+$/' | sort -g |
		awk 'NR == 1 { lo = $1 } { hi = $1 } END { if (NR == 0) print "-"; else print lo "-" hi }'
}

# check_alive PID LOG NAME: stops the benchmark, with the end of LOG, if the
# process PID has exited.
check_alive() {
	kill -0 "$1" 2>/dev/null && return 0
	tail -n 30 "$2" >&2 || true
	die "$3 is no longer running (log: $2)"
}

# delay_mark LABEL: with --latency, makes the delay relay log the hold times
# since the last mark and keeps them for the results as LABEL.
RELAY_HOLDS=()
delay_mark() {
	((LATENCY)) || return 0
	kill -USR1 "$DELAY_PID" 2>/dev/null || return 0
	sleep 0.3
	local lines
	lines="$(grep -E 'client->server: |server->client: ' "$DELAY_LOG" | tail -n 2 | sed -E 's/^.*(client->server|server->client): /\1: /' | paste -sd ';' -)"
	if [[ -n "$1" ]]; then
		RELAY_HOLDS+=("$1|${lines//;/; }")
	fi
}

# cache_delta BEFORE AFTER QUERIES: "hits|pass_throughs" between two
# cache_counts outputs.
cache_delta() {
	awk -v b="$1" -v a="$2" 'BEGIN { split(b, x, " "); split(a, y, " "); printf "%d|%d", y[1] - x[1], y[2] - x[2] }'
}

# hits_pct HITS QUERIES
hits_pct() {
	awk -v h="$1" -v q="$2" 'BEGIN { if (q > 0) printf "%.1f", 100 * h / q; else print "-" }'
}

# start_profile NAME captures a CPU profile of the proxy during the run
# that follows (at most PROFILE_SECONDS, and no longer than a run) into
# $BENCH_DIR/NAME.pprof; finish_profile waits for it.
PROFILE_NAME=""
start_profile() {
	local secs=$PROFILE_SECONDS
	((TIME < secs)) && secs=$TIME
	PROFILE_NAME=$1
	curl -fsS -o "$BENCH_DIR/$PROFILE_NAME.pprof" \
		"http://$PPROF_ADDR/debug/pprof/profile?seconds=$secs" 2>"$LOG_DIR/$PROFILE_NAME-pprof.log" &
	PROFILE_PID=$!
}
finish_profile() {
	[[ -n "$PROFILE_PID" ]] || return 0
	if wait "$PROFILE_PID"; then
		log "CPU profile written to $BENCH_DIR/$PROFILE_NAME.pprof"
	else
		FAILURES+=("$PROFILE_NAME: CPU profile capture failed (log: $LOG_DIR/$PROFILE_NAME-pprof.log)")
	fi
	PROFILE_PID=""
}

if ((RW_CACHE)); then
	# oltp_read_write through the proxy, the sbtest tables cached and not
	# cached, alternating so that both states see the same machine and the
	# same (growing) tables; the tables are cached when this starts.
	# With --compare-bin, both proxies switch their tables together, and in
	# each state the two builds run back to back: the proxy first in the
	# first state of a repetition, the --compare-bin proxy first in the
	# second (new old | old new). As the state a repetition starts with
	# alternates, each build runs first in each state every other repetition.
	builds_note=""
	((RW_COMPARE)) && builds_note=" through both proxies,"
	log "running $RW_WORKLOAD x --point_selects ${POINT_SELECTS_LIST[*]} x ${#PS_LIST[@]} ps mode(s), cached and uncached,$builds_note $REPEAT time(s): $THREADS threads, ${TIME}s per run"
	CACHED_NOW=1
	for n in "${POINT_SELECTS_LIST[@]}"; do
		for ps in "${PS_LIST[@]}"; do
			U_TPS=() C_TPS=() U_QPS=() C_QPS=() U_P95=() C_P95=() TPS_RATIOS=() QPS_RATIOS=()
			BU_QPS=() BC_QPS=() B_QPS_RATIOS=() NO_U_RATIOS=() NO_C_RATIOS=()
			c_queries=0 c_hits=0 c_pass=0 b_queries=0 b_hits=0 b_pass=0
			for ((rep = 1; rep <= REPEAT; rep++)); do
				if ((CACHED_NOW)); then order=(cached uncached); else order=(uncached cached); fi
				u_qps="" c_qps="" bu_qps="" bc_qps=""
				for si in 0 1; do
					state=${order[si]}
					if [[ $state == cached ]] && ((!CACHED_NOW)); then
						cache_tables
						if ((RW_COMPARE)); then cache_tables baseline; fi
						CACHED_NOW=1
					elif [[ $state == uncached ]] && ((CACHED_NOW)); then
						uncache_tables
						if ((RW_COMPARE)); then uncache_tables baseline; fi
						CACHED_NOW=0
					fi
					builds=(proxy)
					if ((RW_COMPARE)); then
						if ((si == 0)); then builds=(proxy baseline); else builds=(baseline proxy); fi
					fi
					for build in "${builds[@]}"; do
						if [[ $build == baseline ]]; then
							check_alive "$BASELINE_PID" "$BASELINE_LOG" "the --compare-bin proxy"
							if [[ $state == cached ]]; then
								# The other build's run has just written the
								# tables: wait until this proxy's copy is ready.
								wait_cache_ready baseline
								before="$(cache_counts "$BASELINE_ADDR")"
							fi
							run_sysbench "$RW_WORKLOAD" "$ps" "baseline-$state" "$BASELINE_PORT" "-ps$n-$rep" --point_selects="$n"
							if [[ $state == cached ]]; then
								after="$(cache_counts "$BASELINE_ADDR")"
								BC_QPS+=("$R_QPS")
								bc_qps="$R_QPS"
								if [[ -n "$before" && -n "$after" && -n "$R_QUERIES" ]]; then
									IFS='|' read -r h pt <<<"$(cache_delta "$before" "$after")"
									b_queries=$((b_queries + R_QUERIES)) b_hits=$((b_hits + h)) b_pass=$((b_pass + pt))
								fi
							else
								BU_QPS+=("$R_QPS")
								bu_qps="$R_QPS"
							fi
							continue
						fi
						check_alive "$PROXY_PID" "$PROXY_LOG" "the proxy"
						# As for the --compare-bin proxy (at once right after cache_tables).
						if [[ $state == cached ]] && ((RW_COMPARE)); then
							wait_cache_ready
						fi
						[[ $state == cached ]] && before="$(cache_counts)"
						((PROFILE && rep == 1)) && start_profile "$RW_WORKLOAD-ps$n-$ps-$state"
						run_sysbench "$RW_WORKLOAD" "$ps" "$state" "$PROXY_PORT" "-ps$n-$rep" --point_selects="$n"
						finish_profile
						if [[ $state == cached ]]; then
							after="$(cache_counts)"
							C_TPS+=("$R_TPS") C_QPS+=("$R_QPS") C_P95+=("$R_P95")
							c_tps="$R_TPS" c_qps="$R_QPS"
							if [[ -n "$before" && -n "$after" && -n "$R_QUERIES" ]]; then
								IFS='|' read -r h pt <<<"$(cache_delta "$before" "$after")"
								c_queries=$((c_queries + R_QUERIES)) c_hits=$((c_hits + h)) c_pass=$((c_pass + pt))
							fi
						else
							U_TPS+=("$R_TPS") U_QPS+=("$R_QPS") U_P95+=("$R_P95")
							u_tps="$R_TPS" u_qps="$R_QPS"
						fi
					done
				done
				TPS_RATIOS+=("$(ratio "$u_tps" "$c_tps")")
				QPS_RATIOS+=("$(ratio "$u_qps" "$c_qps")")
				if ((RW_COMPARE)); then
					B_QPS_RATIOS+=("$(ratio "$bu_qps" "$bc_qps")")
					NO_U_RATIOS+=("$(ratio "$bu_qps" "$u_qps")") NO_C_RATIOS+=("$(ratio "$bc_qps" "$c_qps")")
				fi
			done
			if ((RW_COMPARE)); then
				# qps only: each build's cached/uncached ratio and the
				# proxy/--compare-bin ratio in each state, with their ranges.
				row="$n|$ps|$(median "${U_QPS[@]}")|$(median "${C_QPS[@]}")|$(median "${QPS_RATIOS[@]}")"
				((REPEAT > 1)) && row+="|$(spread "${QPS_RATIOS[@]}")"
				row+="|$(median "${BU_QPS[@]}")|$(median "${BC_QPS[@]}")|$(median "${B_QPS_RATIOS[@]}")"
				((REPEAT > 1)) && row+="|$(spread "${B_QPS_RATIOS[@]}")"
				row+="|$(median "${NO_U_RATIOS[@]}")"
				((REPEAT > 1)) && row+="|$(spread "${NO_U_RATIOS[@]}")"
				row+="|$(median "${NO_C_RATIOS[@]}")"
				((REPEAT > 1)) && row+="|$(spread "${NO_C_RATIOS[@]}")"
			else
				row="$n|$ps|$(median "${U_TPS[@]}")|$(median "${C_TPS[@]}")|$(median "${TPS_RATIOS[@]}")"
				row+="|$(median "${U_QPS[@]}")|$(median "${C_QPS[@]}")|$(median "${QPS_RATIOS[@]}")"
				row+="|$(median "${U_P95[@]}")|$(median "${C_P95[@]}")"
				((REPEAT > 1)) && row+="|$(spread "${TPS_RATIOS[@]}")"
			fi
			ROWS+=("$row")
			CACHE_ROWS+=("$RW_WORKLOAD --point_selects=$n|$ps|$c_queries|$c_hits|$c_pass|$(hits_pct "$c_hits" "$c_queries")")
			if ((RW_COMPARE)); then
				CACHE_ROWS+=("$RW_WORKLOAD --point_selects=$n (compare-bin)|$ps|$b_queries|$b_hits|$b_pass|$(hits_pct "$b_hits" "$b_queries")")
			fi
		done
	done
	if ((!CACHED_NOW)); then
		cache_tables
		if ((RW_COMPARE)); then cache_tables baseline; fi
	fi
else
	log "running ${#WORKLOAD_LIST[@]} workload(s) x ${#PS_LIST[@]} ps mode(s), $REPEAT time(s): $THREADS threads, ${TIME}s per run"
	# The delay relay has carried the proxy's startup and cache loads; count
	# from here.
	delay_mark ""
	for workload in "${WORKLOAD_LIST[@]}"; do
		for ps in "${PS_LIST[@]}"; do
			D_QPS=() D_P95=() RL_QPS=() P_QPS=() P_P95=() RATIOS=() RELAY_RATIOS=() PR_RATIOS=() P95_RATIOS=() ND_P95=()
			B_QPS=() PB_RATIOS=() FL_QPS=() PF_RATIOS=()
			c_queries=0 c_hits=0 c_pass=0 c_ok=1
			for ((rep = 1; rep <= REPEAT; rep++)); do
				sfx=""
				((REPEAT > 1)) && sfx="-$rep"
				if ((LATENCY)); then
					# Reference: MariaDB without the delay relay.
					run_sysbench "$workload" "$ps" nodelay "$DB_PORT" "$sfx"
					ND_P95+=("$R_P95")
				fi
				run_sysbench "$workload" "$ps" direct "$DIRECT_PORT" "$sfx"
				d_qps="$R_QPS" d_p95="$R_P95"
				delay_mark "$workload ps=$ps direct$sfx"
				r_qps="" p_qps="" p_p95="" b_qps="" f_qps=""
				if ((FLOOR)); then
					check_alive "$RELAY_PID" "$RELAY_LOG" tcprelay
					run_sysbench "$workload" "$ps" relay "$RELAY_PORT" "$sfx"
					r_qps="$R_QPS"
				fi
				if ((FLOORSRV)); then
					check_alive "$FLOORSRV_PID" "$FLOORSRV_LOG" floorserver
					run_sysbench "$workload" "$ps" floor "$FLOORSRV_PORT" "$sfx"
					f_qps="$R_QPS"
				fi
				if ((!DIRECT_ONLY)); then
					check_alive "$PROXY_PID" "$PROXY_LOG" "the proxy"
					if [[ -n "$BASELINE_BIN" ]]; then
						kill -0 "$BASELINE_PID" 2>/dev/null || die "the baseline proxy is no longer running (log: $BASELINE_LOG)"
						run_sysbench "$workload" "$ps" baseline "$BASELINE_PORT" "$sfx"
						b_qps="$R_QPS"
					fi
					((PROFILE && rep == 1)) && start_profile "$workload-$ps"
					if ((CACHE)); then
						before="$(cache_counts)"
					fi
					run_sysbench "$workload" "$ps" proxy "$PROXY_PORT" "$sfx"
					p_qps="$R_QPS" p_p95="$R_P95"
					delay_mark "$workload ps=$ps proxy$sfx"
					if ((CACHE)); then
						# Only the proxied run goes through the proxy, so the change in
						# the counters is this run's.
						after="$(cache_counts)"
						if [[ -n "$before" && -n "$after" && -n "$R_QUERIES" ]]; then
							IFS='|' read -r h pt <<<"$(cache_delta "$before" "$after")"
							c_queries=$((c_queries + R_QUERIES)) c_hits=$((c_hits + h)) c_pass=$((c_pass + pt))
						else
							c_ok=0
						fi
					fi
					finish_profile
				fi
				D_QPS+=("$d_qps") D_P95+=("$d_p95") RL_QPS+=("$r_qps") P_QPS+=("$p_qps") P_P95+=("$p_p95")
				RATIOS+=("$(ratio "$d_qps" "$p_qps")") P95_RATIOS+=("$(ratio "$d_p95" "$p_p95")")
				RELAY_RATIOS+=("$(ratio "$d_qps" "$r_qps")") PR_RATIOS+=("$(ratio "$r_qps" "$p_qps")")
				B_QPS+=("$b_qps") PB_RATIOS+=("$(ratio "$b_qps" "$p_qps")")
				FL_QPS+=("$f_qps") PF_RATIOS+=("$(ratio "$f_qps" "$p_qps")")
			done
			# With one run per row these are that run's figures; with
			# --repeat, medians (of the runs, and of each run's ratio).
			row="$workload|$ps|$(median "${D_QPS[@]}")|$(median "${P_QPS[@]}")|$(median "${RATIOS[@]}")"
			row+="|$(median "${D_P95[@]}")|$(median "${P_P95[@]}")"
			if ((FLOOR)); then
				row+="|$(median "${RL_QPS[@]}")|$(median "${RELAY_RATIOS[@]}")|$(median "${PR_RATIOS[@]}")"
			fi
			if ((FLOORSRV)); then
				row+="|$(median "${FL_QPS[@]}")|$(median "${PF_RATIOS[@]}")"
			fi
			if [[ -n "$BASELINE_BIN" ]]; then
				row+="|$(median "${B_QPS[@]}")|$(median "${PB_RATIOS[@]}")"
			fi
			((REPEAT > 1)) && row+="|$(spread "${RATIOS[@]}")"
			if ((LATENCY)); then
				row+="|$(median "${P95_RATIOS[@]}")"
				((REPEAT > 1)) && row+="|$(spread "${P95_RATIOS[@]}")"
				row+="|$(median "${ND_P95[@]}")"
			fi
			ROWS+=("$row")
			if ((CACHE)); then
				if ((c_ok)); then
					CACHE_ROWS+=("$workload|$ps|$c_queries|$c_hits|$c_pass|$(hits_pct "$c_hits" "$c_queries")")
				else
					CACHE_ROWS+=("$workload|$ps|${c_queries}|-|-|-")
				fi
			fi
		done
	done
fi

# --- report --------------------------------------------------------------

if ((CACHE)); then
	if kill -0 "$PROXY_PID" 2>/dev/null; then
		CACHE_AFTER="$(mysql_proxy -e "$CACHED_TABLES_SQL" 2>/dev/null)" || CACHE_AFTER=""
	fi
	[[ -n "$CACHE_AFTER" ]] || FAILURES+=("could not read tableproxy.cached_tables after the runs")
	if ((RW_COMPARE)); then
		if kill -0 "$BASELINE_PID" 2>/dev/null; then
			BASELINE_CACHE_AFTER="$(mysql_at "$BASELINE_ADDR" -e "$CACHED_TABLES_SQL" 2>/dev/null)" || BASELINE_CACHE_AFTER=""
		fi
		[[ -n "$BASELINE_CACHE_AFTER" ]] || FAILURES+=("could not read tableproxy.cached_tables of the --compare-bin proxy after the runs")
	fi
fi

MEMORY="$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
SYSBENCH_VERSION="$(sysbench --version | awk '{ print $2 }')"
COMMIT="$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
# A binary given with --proxy-bin is named as given; the revision is then the
# harness's.
PROXY_BUILD="tableproxy $COMMIT"
if [[ -n "$PROXY_BIN" && "$PROXY_BIN" != "$ROOT/bin/tableproxy" ]]; then
	PROXY_BUILD="tableproxy binary $PROXY_BIN (bench/run.sh at $COMMIT)"
fi
[[ -n "$BASELINE_BIN" ]] && PROXY_BUILD+="; --compare-bin: tableproxy binary $BASELINE_BIN"
DATE="$(date -u)"
RESULTS="$BENCH_DIR/results-$(date -u +%Y%m%dT%H%M%SZ).md"

# Column headers and console widths (negative: left-aligned). With --cache the
# proxy columns say so.
P=proxy
((CACHE)) && P=proxy+cache
if ((RW_COMPARE)); then
	# new: the proxy; old: the --compare-bin proxy.
	HEADERS=(point_selects ps "new uncached qps" "new cached qps" "new cached/uncached")
	WIDTHS=(-13 -8 12 12 9)
	((REPEAT > 1)) && HEADERS+=("range") && WIDTHS+=(9)
	HEADERS+=("old uncached qps" "old cached qps" "old cached/uncached")
	WIDTHS+=(12 12 9)
	((REPEAT > 1)) && HEADERS+=("range") && WIDTHS+=(9)
	HEADERS+=("new/old uncached")
	WIDTHS+=(9)
	((REPEAT > 1)) && HEADERS+=("range") && WIDTHS+=(9)
	HEADERS+=("new/old cached")
	WIDTHS+=(9)
	((REPEAT > 1)) && HEADERS+=("range") && WIDTHS+=(9)
elif ((RW_CACHE)); then
	HEADERS=(point_selects ps "uncached tps" "cached tps" "tps ratio" "uncached qps" "cached qps" "qps ratio"
		"uncached p95 ms" "cached p95 ms")
	WIDTHS=(-13 -8 12 12 9 12 12 9 15 13)
	((REPEAT > 1)) && HEADERS+=("tps ratio range") && WIDTHS+=(15)
else
	HEADERS=(workload ps "direct qps" "$P qps" ratio "direct p95 ms" "$P p95 ms")
	WIDTHS=(-22 -8 12 12 6 14 13)
	if ((FLOOR)); then
		HEADERS+=("relay qps" relay/direct "$P/relay")
		WIDTHS+=(12 12 11)
	fi
	if ((FLOORSRV)); then
		HEADERS+=("floor qps" "$P/floor")
		WIDTHS+=(12 11)
	fi
	if [[ -n "$BASELINE_BIN" ]]; then
		HEADERS+=("compare-bin qps" "$P/compare-bin")
		WIDTHS+=(15 17)
	fi
	((REPEAT > 1)) && HEADERS+=("ratio range") && WIDTHS+=(11)
	if ((LATENCY)); then
		HEADERS+=("p95 $P/direct")
		WIDTHS+=(10)
		((REPEAT > 1)) && HEADERS+=("p95 ratio range") && WIDTHS+=(15)
		HEADERS+=("no-delay direct p95 ms")
		WIDTHS+=(10)
	fi
fi
FORMAT=""
MD_ALIGN="|---|---|"
for i in "${!HEADERS[@]}"; do
	w=${WIDTHS[i]}
	pad=${w#-}
	((${#HEADERS[i]} > pad)) && pad=${#HEADERS[i]}
	if ((w < 0)); then FORMAT+="%-${pad}s"; else FORMAT+="%${pad}s"; fi
	((i < ${#HEADERS[@]} - 1)) && FORMAT+=" "
	((i >= 2)) && MD_ALIGN+="---:|"
done
FORMAT+="\n"
CACHE_LABEL="proxy: cache plugin, sbtest tables cached (ALTER TABLE ... CACHE); the direct and relay runs are uncached"
((FLOORSRV)) && CACHE_LABEL+="; floor: bench/floorserver, which answers every statement with the recorded answer to the first one of its shape (the least any server can do per query)"
if ((LATENCY)); then
	CACHE_LABEL+="; MariaDB behind bench/tcprelay -delay $DELAY (per direction) for the direct runs and the proxy's backend connections alike; no-delay direct: the same run against MariaDB without the relay, for reference"
elif ((RW_CACHE)); then
	CACHE_LABEL="proxy only, cache plugin: each row compares $RW_WORKLOAD through the proxy with the sbtest tables cached (ALTER TABLE ... CACHE) and not cached (ALTER TABLE ... NOCACHE); ratios are cached/uncached"
	if ((RW_COMPARE)); then
		CACHE_LABEL="proxies only, cache plugin: each row compares $RW_WORKLOAD with the sbtest tables cached (ALTER TABLE ... CACHE) and not cached (ALTER TABLE ... NOCACHE) through the proxy (new) and through the --compare-bin proxy (old), each caching the tables itself; in each state the two run back to back, new first in the first state of a repetition and old first in the second; cached/uncached: each build's qps ratio; new/old: the proxy's qps over the --compare-bin proxy's in the same state"
	fi
fi
((REPEAT > 1)) && CACHE_LABEL+=". Each figure is the median of $REPEAT runs (ratios: median of the per-run ratios; range: min-max of them)"

if ((FLOOR)); then
	SETTINGS="$THREADS threads, ${TIME}s per run, $TABLES table(s) x $TABLE_SIZE rows, with the bench/tcprelay floor"
	((FLOORSRV)) && SETTINGS+=" and the bench/floorserver floor"
else
	SETTINGS="$THREADS threads, ${TIME}s per run, $TABLES table(s) x $TABLE_SIZE rows"
fi
((REPEAT > 1)) && SETTINGS+=", $REPEAT runs each"
((SOCKET)) && SETTINGS+=", sysbench over Unix sockets (the proxy's backend over TCP)"
[[ -n "$RATE" ]] && SETTINGS+=", every run offered $RATE transactions/s (sysbench --rate)"
CACHE_ACTIVITY_TITLE="Cache activity of each proxied run (queries: sysbench's total; hits, pass_throughs: change in tableproxy.cached_tables, summed over the sbtest tables):"
if ((RW_CACHE)); then
	CACHE_ACTIVITY_TITLE="Cache activity of the cached runs (queries: sysbench's total; hits, pass_throughs: change in tableproxy.cached_tables, summed over the sbtest tables and the $REPEAT run(s)):"
elif ((REPEAT > 1)); then
	CACHE_ACTIVITY_TITLE="Cache activity of the proxied runs (queries: sysbench's total; hits, pass_throughs: change in tableproxy.cached_tables, summed over the sbtest tables and the $REPEAT runs):"
fi
CPU_TITLE="CPU time per query of each process over each run (user + system, from /proc; the machine's $(nproc) CPUs are shared by all three):"
DELAY_TITLE="How long bench/tcprelay -delay $DELAY held each chunk (read to write, per direction; the proxied runs only send it what the cache passes through):"

{
	echo "Date: $DATE; CPUs: $(nproc); memory: $MEMORY; MariaDB $MARIADB_VERSION; sysbench $SYSBENCH_VERSION; $PROXY_BUILD"
	echo
	echo "Command: \`$COMMAND_LINE\` ($SETTINGS)"
	echo
	if ((CACHE)); then
		echo "$CACHE_LABEL"
		echo
	fi
	line="|"
	for h in "${HEADERS[@]}"; do
		line+=" $h |"
	done
	echo "$line"
	echo "$MD_ALIGN"
	for row in "${ROWS[@]}"; do
		echo "| ${row//|/ | } |"
	done
	if ((${#NOTES[@]} > 0)); then
		echo
		for n in "${NOTES[@]}"; do
			echo "- $n"
		done
	fi
	if ((${#CPU_ROWS[@]} > 0)); then
		echo
		echo "$CPU_TITLE"
		echo
		echo "| workload | ps | run | CPU µs per query |"
		echo "|---|---|---|---|"
		for row in "${CPU_ROWS[@]}"; do
			echo "| ${row//|/ | } |"
		done
	fi
	if ((CACHE)); then
		echo
		echo "$CACHE_ACTIVITY_TITLE"
		echo
		echo "| workload | ps | queries | hits | pass_throughs | hits % of queries |"
		echo "|---|---|---:|---:|---:|---:|"
		for row in "${CACHE_ROWS[@]}"; do
			echo "| ${row//|/ | } |"
		done
		echo
		echo "tableproxy.cached_tables before the runs:"
		echo
		markdown_tsv <<<"$CACHE_BEFORE"
		echo
		echo "tableproxy.cached_tables after the runs:"
		echo
		if [[ -n "$CACHE_AFTER" ]]; then
			markdown_tsv <<<"$CACHE_AFTER"
		else
			echo "(not available)"
		fi
		if ((RW_COMPARE)); then
			echo
			echo "tableproxy.cached_tables of the --compare-bin proxy before the runs:"
			echo
			markdown_tsv <<<"$BASELINE_CACHE_BEFORE"
			echo
			echo "tableproxy.cached_tables of the --compare-bin proxy after the runs:"
			echo
			if [[ -n "$BASELINE_CACHE_AFTER" ]]; then
				markdown_tsv <<<"$BASELINE_CACHE_AFTER"
			else
				echo "(not available)"
			fi
		fi
	fi
	if ((LATENCY)); then
		echo
		echo "$DELAY_TITLE"
		echo
		for h in "${RELAY_HOLDS[@]}"; do
			echo "- ${h%%|*}: ${h#*|}"
		done
	fi
} >"$RESULTS"

echo
if ((CACHE)); then
	echo "$CACHE_LABEL"
	echo
fi
# shellcheck disable=SC2059 # FORMAT is built above from fixed widths
printf "$FORMAT" "${HEADERS[@]}"
for row in "${ROWS[@]}"; do
	IFS='|' read -r -a cols <<<"$row"
	# shellcheck disable=SC2059
	printf "$FORMAT" "${cols[@]}"
done
if ((${#NOTES[@]} > 0)); then
	echo
	for n in "${NOTES[@]}"; do
		echo "note: $n"
	done
fi
if ((${#CPU_ROWS[@]} > 0)); then
	echo
	echo "$CPU_TITLE"
	for row in "${CPU_ROWS[@]}"; do
		IFS='|' read -r -a cols <<<"$row"
		printf '%-22s %-8s %-14s %s\n' "${cols[@]}"
	done
fi
if ((CACHE)); then
	echo
	echo "$CACHE_ACTIVITY_TITLE"
	{
		printf 'workload\tps\tqueries\thits\tpass_throughs\thits %% of queries\n'
		for row in "${CACHE_ROWS[@]}"; do
			printf '%s\n' "${row//|/$'\t'}"
		done
	} | print_tsv
	echo
	echo "tableproxy.cached_tables after the runs:"
	if [[ -n "$CACHE_AFTER" ]]; then
		print_tsv <<<"$CACHE_AFTER"
	else
		echo "(not available)"
	fi
	if ((RW_COMPARE)); then
		echo
		echo "tableproxy.cached_tables of the --compare-bin proxy after the runs:"
		if [[ -n "$BASELINE_CACHE_AFTER" ]]; then
			print_tsv <<<"$BASELINE_CACHE_AFTER"
		else
			echo "(not available)"
		fi
	fi
fi
echo
if ((LATENCY)); then
	echo "$DELAY_TITLE"
	for h in "${RELAY_HOLDS[@]}"; do
		echo "  ${h%%|*}: ${h#*|}"
	done
	echo
fi
echo "Results written to ${RESULTS#"$ROOT"/}"

if ((${#FAILURES[@]} > 0)); then
	log "${#FAILURES[@]} run(s) failed:"
	for f in "${FAILURES[@]}"; do
		log "  $f"
	done
	exit 1
fi
