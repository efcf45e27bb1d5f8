#!/usr/bin/env bash
# Full check of the repository, as run by CI (.ci/run):
#   gofmt, the docs' links, go vet, build, go test against a private
#   MariaDB, the README's quick start and tour (scripts/quickstart-check.sh,
#   on a MariaDB of its own), go test -race on the concurrent packages, and a
#   short sysbench smoke test through the proxy.
#
# Local shortcuts (CI sets neither):
#   TABLEPROXY_SKIP_RACE=1    skip the -race step
#   TABLEPROXY_SKIP_BENCH=1   skip the sysbench smoke test
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RUN_DIR="${TABLEPROXY_RUN_DIR:-$ROOT/.run}"
mkdir -p "$RUN_DIR"
RUN_DIR="$(cd "$RUN_DIR" && pwd)"

# Per test binary; go test panics with the stuck goroutines when it is hit.
# The end-to-end suite against the -race proxy runs some times slower.
GO_TEST_TIMEOUT=20m
GO_TEST_TIMEOUT_RACE_E2E=25m
RACE_PACKAGES=(./proxy/... ./plugins/... ./lease/... ./cluster/... ./cache/... ./ddloffload/... ./digest/...)

log() { printf 'test.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

fmt_duration() {
	local s=$1
	if ((s >= 60)); then
		printf '%dm%02ds' $((s / 60)) $((s % 60))
	else
		printf '%ds' "$s"
	fi
}

START=$SECONDS
CURRENT_STEP="setup"
PASSED=()
SKIPPED=()
STARTED_DB=0

on_exit() {
	local rc=$?
	trap - EXIT
	if ((STARTED_DB)); then
		"$ROOT/scripts/mariadb.sh" stop || true
	fi
	echo
	if ((rc == 0)); then
		echo "test.sh: OK: all steps succeeded (${#PASSED[@]} run, ${#SKIPPED[@]} skipped) in $(fmt_duration $((SECONDS - START)))"
	else
		echo "test.sh: FAILED at step '$CURRENT_STEP' (exit status $rc) after $(fmt_duration $((SECONDS - START)))"
	fi
	exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# step NAME COMMAND...: runs one step with a banner and its duration.
step() {
	local name=$1 t0=$SECONDS
	shift
	CURRENT_STEP="$name"
	echo
	echo "==> $name"
	"$@"
	echo "<== $name: ok ($(fmt_duration $((SECONDS - t0))))"
	PASSED+=("$name")
}

skip() {
	echo
	echo "==> $1: skipped ($2)"
	SKIPPED+=("$1")
}

# --- prerequisites -------------------------------------------------------

if ! command -v go >/dev/null 2>&1; then
	if [[ -x /usr/local/go/bin/go ]]; then
		PATH="/usr/local/go/bin:$PATH"
	else
		die "'go' was not found on PATH. Install Go (see go.mod for the version) and make sure 'go' is on PATH."
	fi
fi

have() { command -v "$1" >/dev/null 2>&1 || [[ -x "/usr/sbin/$1" ]]; }

missing=()
have mariadbd || missing+=(mariadb-server)
have mariadb || missing+=(mariadb-client)
have sysbench || missing+=(sysbench)
# A C toolchain and the MariaDB client library: the race detector needs cgo,
# and the end-to-end tests compile a small C client against libmariadb.
have gcc || missing+=(gcc libc6-dev)
have mariadb_config || missing+=(libmariadb-dev)
have pkg-config || missing+=(pkg-config)
# The end-to-end tests run real migration frameworks and a Node pool through
# the proxy: Knex and mysql2 from npm (the test runs npm ci), ActiveRecord
# and Django from Debian.
have node || missing+=(nodejs)
have npm || missing+=(npm)
ruby -e 'require "active_record"; require "mysql2"' >/dev/null 2>&1 || missing+=(ruby-activerecord ruby-mysql2)
# Django with MySQLdb from Debian, which e2e/django_test.go runs with
# /usr/bin/python3 (another python3 earlier on PATH may not see them).
/usr/bin/python3 -c 'import django, MySQLdb' >/dev/null 2>&1 || missing+=(python3-django python3-mysqldb)
if ((${#missing[@]} > 0)); then
	command -v apt-get >/dev/null 2>&1 || die "missing packages ${missing[*]}, and apt-get is unavailable"
	log "installing ${missing[*]} with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >/dev/null || die "apt-get update failed"
	apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null ||
		die "apt-get install ${missing[*]} failed"
fi

echo "test.sh: $(go version); $(nproc) CPUs"

# --- backend -------------------------------------------------------------

CURRENT_STEP="start MariaDB"
# Leave an instance that was already running (e.g. the demo's) as it was.
if ! "$ROOT/scripts/mariadb.sh" status >/dev/null 2>&1; then
	STARTED_DB=1
	"$ROOT/scripts/mariadb.sh" start
fi
# shellcheck disable=SC1091
source "$RUN_DIR/mariadb.env"
export TABLEPROXY_TEST_BACKEND TABLEPROXY_TEST_ROOT TABLEPROXY_MARIADB_SOCKET
# Go tests fail, instead of skipping, when the backend or a client tool they
# need is missing.
export TABLEPROXY_TEST_REQUIRE=1
# The end-to-end tests run this binary (built by the "go build" step below)
# instead of building their own copy.
export TABLEPROXY_BIN="$ROOT/bin/tableproxy"

# --- steps ---------------------------------------------------------------

check_gofmt() {
	local out
	out="$(find . \( -path ./.git -o -path ./.run -o -path ./bin -o -path ./vendor -o -name testdata \) -prune \
		-o -name '*.go' -print0 | xargs -0 -r gofmt -l)"
	if [[ -n "$out" ]]; then
		echo "these files are not gofmt-formatted (run 'gofmt -w' on them):"
		echo "$out"
		return 1
	fi
}

step "gofmt" check_gofmt
# Relative links and #anchors of the Markdown docs, and the commands the
# README's quick start names (scripts/checkdocs; no network, under a second).
step "docs links" go run ./scripts/checkdocs
step "go vet" go vet ./...
step "go build" go build -o bin/tableproxy ./cmd/tableproxy
step "go test" go test -count=1 -timeout "$GO_TEST_TIMEOUT" ./...
# Every fuzz target for a bounded time (scripts/fuzz.sh: TABLEPROXY_FUZZ_TIME
# each, 10s by default); a failing input is left under the package's
# testdata/fuzz to be committed as a test case.
step "fuzz" "$ROOT/scripts/fuzz.sh"
# scripts/demo.sh and the README's tour, twice, with the mariadb client, in a
# run directory and on a MariaDB port of their own; stops the demo after.
step "quick start" "$ROOT/scripts/quickstart-check.sh"
if [[ "${TABLEPROXY_SKIP_RACE:-}" == 1 ]]; then
	skip "go test -race" "TABLEPROXY_SKIP_RACE=1"
else
	step "go test -race" go test -count=1 -race -timeout "$GO_TEST_TIMEOUT" "${RACE_PACKAGES[@]}"
	# The end-to-end tests drive many sessions at once through the proxy
	# binary; run them again against a race-detecting build of it.
	step "go build -race" go build -race -o bin/tableproxy-race ./cmd/tableproxy
	step "e2e against the -race proxy" env TABLEPROXY_BIN="$ROOT/bin/tableproxy-race" \
		go test -count=1 -timeout "$GO_TEST_TIMEOUT_RACE_E2E" ./e2e/
fi
if [[ "${TABLEPROXY_SKIP_BENCH:-}" == 1 ]]; then
	skip "sysbench smoke test" "TABLEPROXY_SKIP_BENCH=1"
else
	step "sysbench smoke test" "$ROOT/bench/run.sh" --quick
fi
