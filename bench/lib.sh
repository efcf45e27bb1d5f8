# Shared by the bench scripts (sourced, not run).
#
#   bench_init NAME   ROOT, RUN_DIR (TABLEPROXY_RUN_DIR, exported),
#                     BENCH_DIR ($RUN_DIR/bench-NAME), log and die
#   bench_mariadb     the private MariaDB, started unless it runs
#                     (STARTED_DB=1 then); its environment, DB_PORT,
#                     mysql_root and mysql_at
# shellcheck shell=bash

bench_init() {
	ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
	RUN_DIR="${TABLEPROXY_RUN_DIR:-$ROOT/.run}"
	mkdir -p "$RUN_DIR"
	RUN_DIR="$(cd "$RUN_DIR" && pwd)"
	export TABLEPROXY_RUN_DIR="$RUN_DIR"
	BENCH_DIR="$RUN_DIR/bench-$1"
	BENCH_NAME="$1"
}

log() { printf '%s-bench: %s\n' "$BENCH_NAME" "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

bench_mariadb() {
	STARTED_DB=0
	if ! "$ROOT/scripts/mariadb.sh" status >/dev/null 2>&1; then
		STARTED_DB=1
		"$ROOT/scripts/mariadb.sh" start >&2
	fi
	# shellcheck disable=SC1091
	source "$RUN_DIR/mariadb.env"
	DB_PORT="${TABLEPROXY_TEST_BACKEND##*:}"
}

mysql_root() {
	mariadb --no-defaults -h 127.0.0.1 -P "$DB_PORT" -u "${TABLEPROXY_TEST_ROOT%%:*}" "-p${TABLEPROXY_TEST_ROOT#*:}" --batch "$@"
}

# mysql_at PORT ARGS...: the sbtest user through a proxy.
mysql_at() {
	local port=$1
	shift
	mariadb --no-defaults -h 127.0.0.1 -P "$port" -u sbtest -psbtest --connect-timeout=5 --batch sbtest "$@"
}

# sbtest_sql: SQL that makes database sbtest afresh and user sbtest
# (password sbtest) with every privilege on it, and those to follow the
# binary log (the cache follows it as the admin who cached the tables).
sbtest_sql() {
	local sql="DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest;" host
	for host in 127.0.0.1 localhost; do
		sql+="CREATE USER IF NOT EXISTS 'sbtest'@'$host' IDENTIFIED BY 'sbtest';"
		sql+="GRANT ALL PRIVILEGES ON sbtest.* TO 'sbtest'@'$host';"
		sql+="GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'sbtest'@'$host';"
	done
	printf '%s' "$sql"
}
