#!/usr/bin/env bash
# The long linearizability check of a three-proxy cluster: ROUNDS fault
# cycles (healthy, SIGSTOP of a follower past its lease, SIGCONT, kill -9 of
# the leader and restart, kill -9 of a follower and restart), five histories
# each, every one checked with porcupine. CI runs one round (scripts/test.sh).
#
#   ROUNDS=20 scripts/cluster-check.sh     # 100 histories, about 5 minutes
#
# Needs the MariaDB of scripts/mariadb.sh (started here if it is not running).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RUN_DIR="${TABLEPROXY_RUN_DIR:-$ROOT/.run}"
ROUNDS="${ROUNDS:-20}"
started=0
if ! scripts/mariadb.sh status >/dev/null 2>&1; then
	scripts/mariadb.sh start
	started=1
fi
trap '((started)) && scripts/mariadb.sh stop' EXIT
# shellcheck disable=SC1091
source "$RUN_DIR/mariadb.env"
export TABLEPROXY_TEST_BACKEND TABLEPROXY_TEST_ROOT TABLEPROXY_MARIADB_SOCKET TABLEPROXY_TEST_REQUIRE=1
go build -race -o bin/tableproxy-race ./cmd/tableproxy
TABLEPROXY_BIN="$ROOT/bin/tableproxy-race" TABLEPROXY_CLUSTER_ROUNDS="$ROUNDS" \
	go test -count=1 -v -timeout "$((ROUNDS * 2 + 5))m" -run 'TestClusterLinearizableUnderFaults' ./e2e/ |
	grep -E '_test.go:|DATA RACE|^(--- |ok|FAIL|panic)' | grep -v 'stderr:'
