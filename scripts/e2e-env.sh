# Sourced by the long e2e scripts (cluster-check.sh, ddl-faults.sh,
# fleet-check.sh) from the repository's root: the private MariaDB of
# scripts/mariadb.sh, started if it is not running and then stopped again
# when the script exits, and the environment the e2e tests read from it.
RUN_DIR="${TABLEPROXY_RUN_DIR:-$PWD/.run}"
e2e_started_db=0
if ! scripts/mariadb.sh status >/dev/null 2>&1; then
	scripts/mariadb.sh start
	e2e_started_db=1
fi
trap '((e2e_started_db)) && scripts/mariadb.sh stop || true' EXIT
# shellcheck disable=SC1091
source "$RUN_DIR/mariadb.env"
export TABLEPROXY_TEST_BACKEND TABLEPROXY_TEST_ROOT TABLEPROXY_MARIADB_SOCKET TABLEPROXY_TEST_REQUIRE=1
