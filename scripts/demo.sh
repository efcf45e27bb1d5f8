#!/usr/bin/env bash
# Quick start: run tableproxy in front of a private MariaDB loaded with a
# sample database.
#
#   scripts/demo.sh [start]   start MariaDB, (re)load the demo data, build and start the proxy
#   scripts/demo.sh stop      stop the proxy, then MariaDB
#
# Re-running start reloads the sample data and restarts the proxy with a
# freshly built binary.
#
# Environment (the defaults are the quick start's):
#   TABLEPROXY_RUN_DIR        state and logs (default <repo>/.run)
#   TABLEPROXY_MARIADB_PORT   the private MariaDB's port (default 3307; scripts/mariadb.sh)
#   TABLEPROXY_DEMO_PORT      the proxy's port on 127.0.0.1 (default 6033)
#   TABLEPROXY_DEMO_METRICS   the metrics port on 127.0.0.1 (default 9104)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUN_DIR="${TABLEPROXY_RUN_DIR:-$ROOT/.run}"
mkdir -p "$RUN_DIR"
RUN_DIR="$(cd "$RUN_DIR" && pwd)"

PROXY_HOST=127.0.0.1
PROXY_PORT="${TABLEPROXY_DEMO_PORT:-6033}"
METRICS_PORT="${TABLEPROXY_DEMO_METRICS:-9104}"
METRICS_ADDR="127.0.0.1:$METRICS_PORT"
PROXY_BIN="$ROOT/bin/tableproxy"
PROXY_PID="$RUN_DIR/proxy.pid"
PROXY_LOG="$RUN_DIR/proxy.log"
PROXY_DATA="$RUN_DIR/proxy"
READY_TIMEOUT=30
STOP_TIMEOUT=20

log() { printf 'demo.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[[ "$PROXY_PORT" =~ ^[0-9]+$ ]] || die "TABLEPROXY_DEMO_PORT must be a port number, got '$PROXY_PORT'"
[[ "$METRICS_PORT" =~ ^[0-9]+$ ]] || die "TABLEPROXY_DEMO_METRICS must be a port number, got '$METRICS_PORT'"

port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

proxy_pid() {
	local pid
	[[ -f "$PROXY_PID" ]] || return 1
	pid="$(tr -dc '0-9' <"$PROXY_PID")"
	[[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 1
	# Guard against a stale pid file whose pid was reused by another program.
	[[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == tableproxy ]] || return 1
	echo "$pid"
}

stop_proxy() {
	local pid deadline
	if ! pid="$(proxy_pid)"; then
		rm -f "$PROXY_PID"
		return 0
	fi
	log "stopping tableproxy (pid $pid)"
	kill -TERM "$pid" 2>/dev/null || true
	deadline=$((SECONDS + STOP_TIMEOUT))
	while kill -0 "$pid" 2>/dev/null; do
		if ((SECONDS >= deadline)); then
			log "tableproxy did not exit within ${STOP_TIMEOUT}s; killing it"
			kill -KILL "$pid" 2>/dev/null || true
			break
		fi
		sleep 0.2
	done
	rm -f "$PROXY_PID"
}

cmd_stop() {
	stop_proxy
	"$ROOT/scripts/mariadb.sh" stop
}

cmd_start() {
	command -v go >/dev/null 2>&1 || [[ -x /usr/local/go/bin/go ]] ||
		die "Go is required to build the proxy: install Go and put 'go' on PATH"
	command -v go >/dev/null 2>&1 || PATH="/usr/local/go/bin:$PATH"

	"$ROOT/scripts/mariadb.sh" start
	# shellcheck disable=SC1091
	source "$RUN_DIR/mariadb.env"
	local backend="$TABLEPROXY_TEST_BACKEND"
	local db_port="${backend##*:}"
	local mysql=(mariadb --no-defaults --default-character-set=utf8mb4
		-h 127.0.0.1 -P "$db_port" -u "${TABLEPROXY_TEST_ROOT%%:*}" "-p${TABLEPROXY_TEST_ROOT#*:}")

	log "loading the sample database 'demo' from scripts/demo-schema.sql"
	"${mysql[@]}" -e "CREATE DATABASE IF NOT EXISTS demo CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci" ||
		die "could not create database demo"
	"${mysql[@]}" demo <"$ROOT/scripts/demo-schema.sql" >/dev/null ||
		die "loading scripts/demo-schema.sql failed"

	local host sql=""
	for host in 127.0.0.1 localhost; do
		sql+="CREATE USER IF NOT EXISTS 'demo'@'$host' IDENTIFIED VIA mysql_native_password USING PASSWORD('demo');"
		sql+="ALTER USER 'demo'@'$host' IDENTIFIED VIA mysql_native_password USING PASSWORD('demo');"
		sql+="GRANT ALL PRIVILEGES ON demo.* TO 'demo'@'$host';"
		sql+="CREATE USER IF NOT EXISTS 'admin'@'$host' IDENTIFIED VIA mysql_native_password USING PASSWORD('admin');"
		sql+="ALTER USER 'admin'@'$host' IDENTIFIED VIA mysql_native_password USING PASSWORD('admin');"
		sql+="GRANT ALL PRIVILEGES ON *.* TO 'admin'@'$host';"
	done
	"${mysql[@]}" -e "$sql" || die "could not create the demo and admin users"

	log "building bin/tableproxy"
	(cd "$ROOT" && go build -o bin/tableproxy ./cmd/tableproxy) || die "go build ./cmd/tableproxy failed"

	# A restart picks up the binary that was just built.
	stop_proxy
	port_in_use "$PROXY_PORT" &&
		die "port $PROXY_HOST:$PROXY_PORT is already in use by another process; set TABLEPROXY_DEMO_PORT to a free port"
	port_in_use "$METRICS_PORT" &&
		die "metrics port $METRICS_ADDR is already in use by another process; set TABLEPROXY_DEMO_METRICS to a free port"

	mkdir -p "$PROXY_DATA"
	# No config file: the defaults run the product's plugins (metrics, cached
	# tables, online ADD INDEX), and the admin reads the binary log.
	log "starting tableproxy on $PROXY_HOST:$PROXY_PORT (log: $PROXY_LOG)"
	(
		cd "$ROOT"
		exec nohup "$PROXY_BIN" serve \
			--listen "$PROXY_HOST:$PROXY_PORT" \
			--backend "$backend" \
			--user demo:demo \
			--admin-user admin:admin \
			--data-dir "$PROXY_DATA" \
			--metrics-listen "$METRICS_ADDR" \
			</dev/null >"$PROXY_LOG" 2>&1
	) &
	local pid=$!
	echo "$pid" >"$PROXY_PID"

	local deadline=$((SECONDS + READY_TIMEOUT))
	until mariadb --no-defaults -h "$PROXY_HOST" -P "$PROXY_PORT" -u demo -pdemo \
		--connect-timeout=2 -e 'SELECT 1' >/dev/null 2>&1; do
		if ! kill -0 "$pid" 2>/dev/null; then
			tail -n 30 "$PROXY_LOG" >&2 || true
			rm -f "$PROXY_PID"
			die "tableproxy exited during startup (log: $PROXY_LOG)"
		fi
		if ((SECONDS >= deadline)); then
			tail -n 30 "$PROXY_LOG" >&2 || true
			die "tableproxy did not accept connections within ${READY_TIMEOUT}s (log: $PROXY_LOG)"
		fi
		sleep 0.5
	done

	# A short generated workload, then the advisor's answer: the small,
	# rarely written reference tables are the ones to cache, the orders
	# (written as often as read) are not.
	mariadb --no-defaults -h "$PROXY_HOST" -P "$PROXY_PORT" -u admin -padmin demo \
		-e "ADMIN RESET QUERY DIGESTS" >/dev/null 2>&1 || true
	log "running a short generated workload through the proxy"
	demo_workload | mariadb --no-defaults -h "$PROXY_HOST" -P "$PROXY_PORT" -u demo -pdemo demo >/dev/null ||
		die "the generated workload failed"
	local advice
	advice="$(mariadb --no-defaults -h "$PROXY_HOST" -P "$PROXY_PORT" -u demo -pdemo demo --table -e \
		"SELECT table_name, reads_per_sec, proxy_writes_per_sec, covered_share, verdict FROM tableproxy.cache_candidates WHERE table_schema = 'demo' ORDER BY table_name")" ||
		die "reading tableproxy.cache_candidates failed"

	# The small, rarely written reference tables are the ones to cache.
	local t
	for t in currencies exchange_rates branches; do
		mariadb --no-defaults -h "$PROXY_HOST" -P "$PROXY_PORT" -u admin -padmin demo \
			-e "ALTER TABLE $t CACHE" 2>/dev/null || true # (already cached after a restart)
	done

	cat <<EOF

The cache advisor, after the generated workload (tableproxy.cache_candidates):
$advice

tableproxy is running (pid $pid) in front of MariaDB at $backend.

  Connect:  mariadb -h $PROXY_HOST -P $PROXY_PORT -u demo -pdemo demo
  Admin:    mariadb -h $PROXY_HOST -P $PROXY_PORT -u admin -padmin demo

  Cached:   SELECT table_name, state, row_count FROM tableproxy.cached_tables;
  Try:      SELECT quote, rate FROM exchange_rates WHERE base = 'USD' AND quote = 'EUR' ORDER BY id LIMIT 5;
            EXPLAIN LAST STATEMENT;   -- the first run of a shape goes to MariaDB;
                                      -- run the SELECT again: answered from memory
  Advisor:  SELECT table_name, verdict, reason FROM tableproxy.cache_candidates;
            EXPLAIN CACHE orders;   -- as admin: one table, and its statements that would (not) be served
  Index:    ALTER TABLE audit_log ADD INDEX (actor, at);   -- as admin: an online job
            ADMIN SHOW DDL JOBS;
  Metrics:  http://$METRICS_ADDR/metrics
  Logs:     $PROXY_LOG
  Stop:     scripts/demo.sh stop

EOF
}

# demo_workload prints a short generated workload: point reads of the
# reference tables, and of the orders, a third of which are written.
demo_workload() {
	local i
	for ((i = 1; i <= 100; i++)); do
		echo "SELECT name, symbol FROM currencies WHERE code = 'EUR';"
		echo "SELECT rate FROM exchange_rates WHERE id = $((i % 50 + 1));"
		echo "SELECT name, city FROM branches WHERE id = $((i % 10 + 1));"
		echo "SELECT status, total_amount FROM orders WHERE id = $((i * 7));"
		if ((i % 2 == 0)); then
			echo "UPDATE orders SET status = 'paid' WHERE id = $((i * 7)) AND status = 'pending';"
		fi
	done
}

case "${1:-start}" in
start) cmd_start ;;
stop) cmd_stop ;;
*)
	echo "usage: $0 [start|stop]" >&2
	exit 2
	;;
esac
