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
ROUNDS="${ROUNDS:-20}"
# shellcheck source=scripts/e2e-env.sh
source scripts/e2e-env.sh
go build -race -o bin/tableproxy-race ./cmd/tableproxy
TABLEPROXY_BIN="$ROOT/bin/tableproxy-race" TABLEPROXY_CLUSTER_ROUNDS="$ROUNDS" \
	go test -count=1 -v -timeout "$((ROUNDS * 2 + 5))m" -run 'TestClusterLinearizableUnderFaults' ./e2e/ |
	grep -E '_test.go:|DATA RACE|^(--- |ok|FAIL|panic)' | grep -v 'stderr:'
