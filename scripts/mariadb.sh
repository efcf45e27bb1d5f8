#!/usr/bin/env bash
# Manage a private MariaDB instance for tests, the demo and benchmarks.
#
#   scripts/mariadb.sh start    start it (initialising the datadir if needed)
#   scripts/mariadb.sh stop     shut it down cleanly
#   scripts/mariadb.sh status   exit 0 if it is running
#   scripts/mariadb.sh env      print the environment file for Go tests
#   scripts/mariadb.sh replica start|stop|status|env
#                               a second instance replicating from this one
#                               (GTID, ROW), for replica lag and checksums
#
# The instance never touches the system MariaDB: it runs with --no-defaults,
# keeps all of its state under ${TABLEPROXY_RUN_DIR:-<repo>/.run}/mariadb and
# listens on 127.0.0.1:${TABLEPROXY_MARIADB_PORT:-3307} only. Its server id
# is ${TABLEPROXY_MARIADB_SERVER_ID:-1} (a second instance set up as a replica
# needs another).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUN_DIR="${TABLEPROXY_RUN_DIR:-$ROOT/.run}"
PORT="${TABLEPROXY_MARIADB_PORT:-3307}"
SERVER_ID="${TABLEPROXY_MARIADB_SERVER_ID:-1}"

ADMIN_USER=tproot
ADMIN_PASS=tproot
START_TIMEOUT=60
STOP_TIMEOUT=60

log() { printf 'mariadb.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[[ "$PORT" =~ ^[0-9]+$ ]] || die "TABLEPROXY_MARIADB_PORT must be a number, got '$PORT'"
[[ "$SERVER_ID" =~ ^[1-9][0-9]*$ ]] || die "TABLEPROXY_MARIADB_SERVER_ID must be a positive number, got '$SERVER_ID'"

mkdir -p "$RUN_DIR"
RUN_DIR="$(cd "$RUN_DIR" && pwd)"
BASE="$RUN_DIR/mariadb"
DATADIR="$BASE/data"
PIDFILE="$BASE/mariadb.pid"
LOG="$BASE/mariadb.log"
ENV_FILE="$RUN_DIR/mariadb.env"
TLS_DIR="$BASE/tls"
SOCKET="$BASE/mariadb.sock"
# Unix socket paths are limited to 108 bytes; a deeply nested checkout would
# make mariadbd refuse to start, so fall back to a stable path under /tmp.
if (( ${#SOCKET} > 100 )); then
	SOCKET="/tmp/tableproxy-mariadb-$(printf '%s' "$BASE" | cksum | cut -d' ' -f1).sock"
fi

find_bin() {
	local name
	for name in "$@"; do
		if command -v "$name" >/dev/null 2>&1; then
			command -v "$name"
			return 0
		fi
		if [[ -x "/usr/sbin/$name" ]]; then
			echo "/usr/sbin/$name"
			return 0
		fi
	done
	return 1
}

ensure_installed() {
	if find_bin mariadbd >/dev/null && find_bin mariadb >/dev/null &&
		find_bin mariadb-admin >/dev/null && find_bin mariadb-install-db >/dev/null; then
		return 0
	fi
	command -v apt-get >/dev/null 2>&1 ||
		die "mariadbd is not installed and apt-get is unavailable; install MariaDB server and client"
	log "installing mariadb-server and mariadb-client with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >/dev/null || die "apt-get update failed"
	apt-get install -y -q --no-install-recommends mariadb-server mariadb-client >/dev/null ||
		die "apt-get install mariadb-server mariadb-client failed"
	find_bin mariadbd >/dev/null || die "mariadbd still not found after installing mariadb-server"
}

server_pid() {
	local pid
	[[ -f "$PIDFILE" ]] || return 1
	pid="$(tr -dc '0-9' <"$PIDFILE")"
	[[ -n "$pid" ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	# Guard against a stale pid file whose pid was reused by another program.
	[[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == mariadbd ]] || return 1
	# A server killed with SIGKILL can linger as a zombie until it is reaped;
	# it is not running.
	[[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]] || return 1
	echo "$pid"
}

ping_server() {
	"$MARIADB_ADMIN" --no-defaults --socket="$SOCKET" --user=root \
		--connect-timeout=2 ping >/dev/null 2>&1
}

sql_root() {
	"$MARIADB" --no-defaults --socket="$SOCKET" --user=root --batch "$@"
}

log_tail() {
	if [[ -f "$LOG" ]]; then
		log "last lines of $LOG:"
		tail -n 30 "$LOG" >&2
	fi
}

port_in_use() {
	# bash's /dev/tcp avoids depending on ss/netstat being installed.
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

init_datadir() {
	[[ -d "$DATADIR/mysql" ]] && return 0
	log "initialising datadir $DATADIR"
	rm -rf "$DATADIR"
	mkdir -p "$DATADIR"
	if ! "$INSTALL_DB" --no-defaults --user=root --datadir="$DATADIR" \
		--auth-root-authentication-method=socket --skip-test-db \
		>"$BASE/install-db.log" 2>&1; then
		tail -n 30 "$BASE/install-db.log" >&2
		rm -rf "$DATADIR"
		die "mariadb-install-db failed (full output in $BASE/install-db.log)"
	fi
}

# init_tls makes a private CA and a server certificate for 127.0.0.1 and
# localhost (once), so clients and the proxy can test TLS to the backend.
init_tls() {
	[[ -f "$TLS_DIR/server-cert.pem" ]] && return 0
	command -v openssl >/dev/null || die "openssl is needed for the backend's TLS certificate"
	mkdir -p "$TLS_DIR"
	(
		cd "$TLS_DIR"
		openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=tableproxy test CA" \
			-keyout ca-key.pem -out ca.pem
		openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout server-key.pem -out server.csr
		printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >san.ext
		openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 3650 \
			-extfile san.ext -out server-cert.pem
	) >"$BASE/tls.log" 2>&1 || die "could not make TLS certificates (see $BASE/tls.log)"
}

setup_accounts() {
	local host sql=""
	for host in 127.0.0.1 localhost; do
		sql+="CREATE USER IF NOT EXISTS '$ADMIN_USER'@'$host' IDENTIFIED VIA mysql_native_password USING PASSWORD('$ADMIN_PASS');"
		sql+="ALTER USER '$ADMIN_USER'@'$host' IDENTIFIED VIA mysql_native_password USING PASSWORD('$ADMIN_PASS');"
		sql+="GRANT ALL PRIVILEGES ON *.* TO '$ADMIN_USER'@'$host' WITH GRANT OPTION;"
	done
	sql_root -e "$sql" || die "could not create the $ADMIN_USER account"
}

write_env() {
	local tmp="$ENV_FILE.tmp.$$"
	cat >"$tmp" <<ENV
export TABLEPROXY_TEST_BACKEND=127.0.0.1:$PORT
export TABLEPROXY_TEST_ROOT=$ADMIN_USER:$ADMIN_PASS
export TABLEPROXY_MARIADB_SOCKET=$SOCKET
export TABLEPROXY_TEST_BACKEND_CA=$TLS_DIR/ca.pem
ENV
	mv -f "$tmp" "$ENV_FILE"
}

cmd_start() {
	local pid deadline
	ensure_installed
	resolve_bins
	if pid="$(server_pid)" && ping_server; then
		log "already running (pid $pid, port $PORT)"
		setup_accounts
		write_env
		return 0
	fi
	if pid="$(server_pid)"; then
		# Running but not answering yet (e.g. still starting): wait for it below.
		log "mariadbd (pid $pid) is running but not answering yet; waiting"
	else
		rm -f "$PIDFILE"
		if port_in_use "$PORT"; then
			die "port 127.0.0.1:$PORT is already in use by another process; set TABLEPROXY_MARIADB_PORT to a free port"
		fi
		mkdir -p "$BASE"
		init_datadir
		init_tls
		rm -f "$SOCKET"
		log "starting mariadbd on 127.0.0.1:$PORT (log: $LOG)"
		# --no-defaults must come first so /etc/mysql never leaks in.
		nohup "$MARIADBD" --no-defaults --user=root \
			--bind-address=127.0.0.1 --port="$PORT" --socket="$SOCKET" \
			--datadir="$DATADIR" --pid-file="$PIDFILE" --log-error="$LOG" \
			--log-bin="$BASE/binlog" --binlog-format=ROW --binlog-row-image=FULL \
			--server-id="$SERVER_ID" --local-infile=1 --max-allowed-packet=64M \
			--innodb-buffer-pool-size=256M --skip-name-resolve \
			--ssl-ca="$TLS_DIR/ca.pem" --ssl-cert="$TLS_DIR/server-cert.pem" --ssl-key="$TLS_DIR/server-key.pem" \
			</dev/null >>"$LOG" 2>&1 &
		pid=$!
	fi

	deadline=$((SECONDS + START_TIMEOUT))
	until ping_server; do
		if ! kill -0 "$pid" 2>/dev/null; then
			log_tail
			die "mariadbd exited during startup"
		fi
		if ((SECONDS >= deadline)); then
			log_tail
			die "mariadbd did not answer within ${START_TIMEOUT}s"
		fi
		sleep 0.5
	done
	# The pid file is written slightly after the socket starts answering.
	deadline=$((SECONDS + 10))
	until server_pid >/dev/null; do
		((SECONDS < deadline)) || die "mariadbd answers but did not write $PIDFILE"
		sleep 0.2
	done
	setup_accounts
	write_env
	log "running (pid $(server_pid), port $PORT, socket $SOCKET)"
}

cmd_stop() {
	local pid deadline
	if ! pid="$(server_pid)"; then
		rm -f "$PIDFILE"
		log "not running"
		return 0
	fi
	log "stopping mariadbd (pid $pid)"
	# SIGTERM also makes mariadbd shut down cleanly; it is the fallback when
	# the socket does not accept the shutdown command.
	if [[ -z "$MARIADB_ADMIN" ]] || ! timeout 30 "$MARIADB_ADMIN" --no-defaults \
		--socket="$SOCKET" --user=root shutdown >/dev/null 2>&1; then
		log "shutdown command failed; sending SIGTERM"
		kill -TERM "$pid" 2>/dev/null || true
	fi
	deadline=$((SECONDS + STOP_TIMEOUT))
	while kill -0 "$pid" 2>/dev/null; do
		if ((SECONDS >= deadline)); then
			log "mariadbd did not stop within ${STOP_TIMEOUT}s; killing it"
			kill -KILL "$pid" 2>/dev/null || true
			sleep 1
			break
		fi
		sleep 0.2
	done
	rm -f "$PIDFILE"
	log "stopped"
}

cmd_status() {
	local pid
	if pid="$(server_pid)" && ping_server; then
		echo "mariadb: running (pid $pid, 127.0.0.1:$PORT, socket $SOCKET)"
		return 0
	fi
	echo "mariadb: not running"
	return 1
}

cmd_env() {
	[[ -f "$ENV_FILE" ]] || die "$ENV_FILE does not exist; run '$0 start' first"
	cat "$ENV_FILE"
}

# cmd_replica VERB manages a replica of this instance: the same script with
# its own run directory ($RUN_DIR/replica), port (TABLEPROXY_MARIADB_REPLICA_PORT,
# default the primary's + 1) and server id (TABLEPROXY_MARIADB_REPLICA_SERVER_ID,
# default the primary's + 1). "start" starts it and has it replicate this
# instance from the beginning of its binary log with GTID (the private
# instance keeps its whole log), then waits until it has caught up.
# TABLEPROXY_MARIADB_REPLICA_FROM=now starts it from the primary's current
# position instead, and TABLEPROXY_MARIADB_REPLICA_DO_TABLE (a
# replicate_wild_do_table pattern, e.g. 'app%.%') limits what it applies:
# a test replicates its own databases without replaying the others'.
cmd_replica() {
	local verb="${1:-}" rport="${TABLEPROXY_MARIADB_REPLICA_PORT:-$((PORT + 1))}"
	local rid="${TABLEPROXY_MARIADB_REPLICA_SERVER_ID:-$((SERVER_ID + 1))}"
	[[ "$rport" =~ ^[0-9]+$ ]] || die "TABLEPROXY_MARIADB_REPLICA_PORT must be a number, got '$rport'"
	local self=(env "TABLEPROXY_RUN_DIR=$RUN_DIR/replica" "TABLEPROXY_MARIADB_PORT=$rport"
		"TABLEPROXY_MARIADB_SERVER_ID=$rid" "$ROOT/scripts/mariadb.sh")
	case "$verb" in
	stop | status | env)
		"${self[@]}" "$verb"
		return
		;;
	start) ;;
	*) die "usage: $0 replica start|stop|status|env" ;;
	esac
	server_pid >/dev/null && ping_server || die "the primary (port $PORT) is not running: '$0 start' first"
	"${self[@]}" start
	replica_sql() {
		"$MARIADB" --no-defaults -h 127.0.0.1 -P "$rport" -u "$ADMIN_USER" "-p$ADMIN_PASS" --batch "$@"
	}
	local from="${TABLEPROXY_MARIADB_REPLICA_FROM:-start}" only="${TABLEPROXY_MARIADB_REPLICA_DO_TABLE:-}" pos=""
	[[ "$from" == start || "$from" == now ]] || die "TABLEPROXY_MARIADB_REPLICA_FROM must be start or now, got '$from'"
	[[ "$only" =~ ^[A-Za-z0-9_%.]*$ ]] || die "TABLEPROXY_MARIADB_REPLICA_DO_TABLE: letters, digits, _, % and . only"
	if [[ "$from" == now ]] || ! replica_sql -e "SHOW SLAVE STATUS\G" | grep -q "Master_Port: $PORT\$"; then
		[[ "$from" == now ]] && pos="$(sql_root -N -e "SELECT @@gtid_binlog_pos")"
		log "replica on port $rport: replicating 127.0.0.1:$PORT with GTID from ${pos:-the start}${only:+, only $only}"
		replica_sql -e "STOP SLAVE; SET GLOBAL replicate_wild_do_table = '$only'; SET GLOBAL gtid_slave_pos = '$pos';
			CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = $PORT,
				MASTER_USER = '$ADMIN_USER', MASTER_PASSWORD = '$ADMIN_PASS', MASTER_USE_GTID = slave_pos;
			START SLAVE;" || die "could not set up replication on port $rport"
	fi
	local deadline=$((SECONDS + START_TIMEOUT)) status want
	want="$(sql_root -N -e "SELECT @@gtid_binlog_pos")"
	while :; do
		status="$(replica_sql -e "SHOW SLAVE STATUS\G")"
		if grep -q "Slave_SQL_Running: No" <<<"$status" && grep -q "Last_SQL_Errno: [1-9]" <<<"$status"; then
			grep -E "Last_(SQL|IO)_Error" <<<"$status" >&2
			die "the replica on port $rport stopped replicating"
		fi
		if grep -q "Slave_IO_Running: Yes" <<<"$status" && grep -q "Slave_SQL_Running: Yes" <<<"$status" &&
			[[ "$(replica_sql -N -e "SELECT MASTER_GTID_WAIT('$want', 0)")" == 0 ]]; then
			break
		fi
		((SECONDS < deadline)) || { grep -E "Running|Last_.*Error|Seconds_Behind" <<<"$status" >&2; die "the replica on port $rport did not catch up within ${START_TIMEOUT}s"; }
		sleep 0.5
	done
	log "replica running on 127.0.0.1:$rport (server id $rid), caught up with $want"
}

resolve_bins() {
	MARIADBD="$(find_bin mariadbd || true)"
	MARIADB="$(find_bin mariadb || true)"
	MARIADB_ADMIN="$(find_bin mariadb-admin || true)"
	INSTALL_DB="$(find_bin mariadb-install-db || true)"
}
resolve_bins

case "${1:-}" in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
env) cmd_env ;;
replica) cmd_replica "${2:-}" ;;
*)
	echo "usage: $0 start|stop|status|env|replica start|stop|status|env" >&2
	exit 2
	;;
esac
