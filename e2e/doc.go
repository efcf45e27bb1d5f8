// Package e2e holds tableproxy's end-to-end tests: real clients (the
// mariadb command-line client, go-sql-driver/mysql, go-mysql's client, a C
// program on libmariadb, sysbench) talk to the real tableproxy binary in
// front of a real MariaDB, and every answer is compared with the same thing
// done directly against MariaDB. The proxy must be invisible.
//
// The tests need a backend (see internal/testdb); without one they skip,
// unless TABLEPROXY_TEST_REQUIRE=1, when they fail. They build the proxy
// once, or run $TABLEPROXY_BIN when it is set. External tools (mariadb,
// gcc with libmariadb, sysbench) are required under TABLEPROXY_TEST_REQUIRE=1
// and skipped without it.
package e2e
