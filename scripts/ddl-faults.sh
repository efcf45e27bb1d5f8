#!/usr/bin/env bash
# Long fault runs for online ADD INDEX: the e2e fault matrix (kill -9 of
# the proxy, ADMIN CANCEL and ADMIN PAUSE in each stage of a job, with a
# writer on the table throughout) on a larger table and repeated, against
# the private MariaDB. CI runs the matrix once on 4,000 rows.
#
#   scripts/ddl-faults.sh [ROWS [COUNT]]     default 100000 rows, 3 times
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
ROWS="${1:-100000}"
COUNT="${2:-3}"
# shellcheck source=scripts/e2e-env.sh
source scripts/e2e-env.sh
export TABLEPROXY_DDL_FAULT_ROWS="$ROWS"
go test -count="$COUNT" -timeout 60m -run 'TestDDLFaults|TestDDLProxyKilledDuringJob' ./e2e/
