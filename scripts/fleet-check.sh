#!/usr/bin/env bash
# The long linearizability check of a fleet under churn and leader loss:
# TestClusterFleetChurn (three voters, four sidecars) for ROUNDS rounds,
# one porcupine history each, recorded while clients read and write cached
# rows through random proxies (sidecars included). Each round a sidecar is
# killed (kill -9 and SIGTERM in turn) and replaced by a new one, except
# every LEADER_EVERY-th, which kills the leader with kill -9 and restarts
# it. CI runs 6 rounds of churn (scripts/test.sh).
#
#   scripts/fleet-check.sh                      # ROUNDS=100 LEADER_EVERY=5, about 10 minutes
#   ROUNDS=20 LEADER_EVERY=4 scripts/fleet-check.sh
#
# Prints every history's verdict, then a count. Needs the MariaDB of
# scripts/mariadb.sh (started here if it is not running).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
ROUNDS="${ROUNDS:-100}"
LEADER_EVERY="${LEADER_EVERY:-5}"
# shellcheck source=scripts/e2e-env.sh
source scripts/e2e-env.sh
go build -o bin/tableproxy ./cmd/tableproxy
out="$(mktemp)"
set +e
TABLEPROXY_BIN="$ROOT/bin/tableproxy" TABLEPROXY_FLEET_ROUNDS="$ROUNDS" TABLEPROXY_FLEET_LEADER_EVERY="$LEADER_EVERY" \
	go test -count=1 -v -timeout "$((ROUNDS / 4 + 10))m" -run '^TestClusterFleetChurn$' ./e2e/ 2>&1 |
	grep -E '_test.go:|^(--- |ok|FAIL|panic)' | grep -v 'stderr:' | tee "$out"
rc=${PIPESTATUS[0]}
set -e
ok=$(grep -c ', linearizable$' "$out" || true)
bad=$(grep -c 'NOT linearizable' "$out" || true)
unknown=$(grep -c 'check timed out' "$out" || true)
leader=$(grep -c 'leader .*kill -9).*operations' "$out" || true)
echo "fleet-check: $((ok + bad + unknown)) histories ($leader with the leader killed): $ok linearizable, $bad NOT linearizable, $unknown not decided in 30 s; go test exit $rc"
rm -f "$out"
exit "$rc"
