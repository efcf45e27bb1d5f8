#!/usr/bin/env bash
# What the Raft cluster costs: three proxies on loopback in front of one
# MariaDB, every figure compared within the same run (see bench/README.md,
# "Cluster").
#
#   bench/cluster.sh                  # --writes, --reads and --rw (~25 min)
#   bench/cluster.sh --writes         # UPDATE latency, cached vs uncached, and its fsync floor (~3 min)
#   bench/cluster.sh --reads          # cached reads: one member of the cluster vs a single-node proxy
#   bench/cluster.sh --rw             # oltp_read_write --point_selects 10, cached vs uncached, through the cluster
#
# Options: --time SEC (20), --threads N (8), --repeat N (3), --table-size N
# (5000), --writes-n N (300 statements per table and pattern), --writes-repeat
# N (1: each pattern N times, with the median and range of the p99
# difference; the p99 of one run follows the host's stalls), --gap DUR
# (100ms, the pause of the "spaced" pattern), --via follower|leader (the
# member the clients use; follower), --proxy-bin PATH (default: build
# bin/tableproxy), --compare-bin PATH (with --writes: a second three-proxy
# cluster of that build, measured in the same run, its statements
# interleaved with the first cluster's).
#
# Environment: TABLEPROXY_RUN_DIR, TABLEPROXY_MARIADB_PORT as for
# bench/run.sh; TABLEPROXY_BENCH_CLUSTER_PORT (6400): the proxies listen on
# that port + 1..4 and their Raft addresses on + 11..14.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init cluster
LOG_DIR="$BENCH_DIR/logs"
BASE_PORT="${TABLEPROXY_BENCH_CLUSTER_PORT:-6400}"


WRITES=0 READS=0 RW=0 TIME=20 THREADS=8 REPEAT=3 TABLE_SIZE=5000 WRITES_N=300 WRITES_REPEAT=1 GAP=100ms VIA=follower PROXY_BIN="" COMPARE_BIN=""
ARGS="$*"
while (($#)); do
	case "$1" in
	--writes) WRITES=1 ;;
	--reads) READS=1 ;;
	--rw) RW=1 ;;
	--time) TIME=$2; shift ;;
	--threads) THREADS=$2; shift ;;
	--repeat) REPEAT=$2; shift ;;
	--table-size) TABLE_SIZE=$2; shift ;;
	--writes-n) WRITES_N=$2; shift ;;
	--writes-repeat) WRITES_REPEAT=$2; shift ;;
	--gap) GAP=$2; shift ;;
	--via) VIA=$2; shift ;;
	--proxy-bin) PROXY_BIN=$2; shift ;;
	--compare-bin) COMPARE_BIN=$2; shift ;;
	-h | --help) sed -n '2,20p' "$0"; exit 0 ;;
	*) die "unknown option $1" ;;
	esac
	shift
done
((WRITES || READS || RW)) || WRITES=1 READS=1 RW=1
[[ "$VIA" == follower || "$VIA" == leader ]] || die "--via is follower or leader"

for c in sysbench mariadb go; do
	command -v "$c" >/dev/null 2>&1 || die "$c is required (bench/run.sh installs sysbench and mariadb-client)"
done

# --- processes -----------------------------------------------------------

PIDS=()
STARTED_DB=0
cleanup() {
	local rc=$? pid
	trap - EXIT INT TERM
	for pid in "${PIDS[@]}"; do
		kill -CONT "$pid" 2>/dev/null || true
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${PIDS[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	if ((STARTED_DB)); then
		"$ROOT/scripts/mariadb.sh" stop || true
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

rm -rf "$BENCH_DIR"
mkdir -p "$LOG_DIR"
bench_mariadb

log "creating database sbtest, user sbtest and $TABLE_SIZE sysbench rows"
sql="$(sbtest_sql)"
sql+="CREATE TABLE sbtest.wkv (id INT PRIMARY KEY, v INT NOT NULL); CREATE TABLE sbtest.wplain LIKE sbtest.wkv;"
sql+="USE sbtest; INSERT INTO sbtest.wkv SELECT seq, 0 FROM seq_1_to_100; INSERT INTO sbtest.wplain SELECT * FROM sbtest.wkv;"
# The second cluster's (--compare-bin) cached table.
sql+="CREATE TABLE sbtest.wkv2 LIKE sbtest.wkv; INSERT INTO sbtest.wkv2 SELECT * FROM sbtest.wkv;"
mysql_root -e "$sql" || die "could not create database sbtest"
SB_COMMON=(--db-driver=mysql --mysql-host=127.0.0.1 --mysql-user=sbtest --mysql-password=sbtest
	--mysql-db=sbtest --tables=1 --table-size="$TABLE_SIZE" --report-interval=0 --percentile=95)
sysbench oltp_read_write "${SB_COMMON[@]}" --mysql-port="$DB_PORT" prepare >"$LOG_DIR/prepare.log" 2>&1 ||
	die "sysbench prepare failed (log: $LOG_DIR/prepare.log)"

if [[ -z "$PROXY_BIN" ]]; then
	log "building bin/tableproxy"
	(cd "$ROOT" && go build -o bin/tableproxy ./cmd/tableproxy)
	PROXY_BIN="$ROOT/bin/tableproxy"
	REV="$(cd "$ROOT" && git rev-parse --short HEAD)$(cd "$ROOT" && git diff --quiet HEAD -- . || echo +dirty)"
else
	REV="$(basename "$PROXY_BIN")"
fi
(cd "$ROOT" && go build -o "$BENCH_DIR/writelat" ./bench/writelat && go build -o "$BENCH_DIR/fsyncprobe" ./bench/fsyncprobe)
# The disk's fsync latency where the Raft logs live, at the start and the
# end (and, with --writes, right after the writes, for their floor).
disk() { "$BENCH_DIR/fsyncprobe" -dir "$BENCH_DIR" -n 100 -gap 20ms; }
# fsync_p99 PROBE: the p99 in ms from a line of disk's.
fsync_p99() { sed -nE 's/.*p99 ([0-9.]+) ms.*/\1/p' <<<"$1"; }

# start_proxy I [JOIN]: proxy I (the build START_BIN, default PROXY_BIN) on
# BASE_PORT+I, Raft on BASE_PORT+10+I.
start_proxy() {
	local i=$1 join=${2:-} port=$((BASE_PORT + $1)) raft=$((BASE_PORT + 10 + $1)) deadline
	local dir="$BENCH_DIR/n$i"
	mkdir -p "$dir/data"
	printf '%s\n' "plugins:" "  - name: cache" >"$dir/tableproxy.yaml"
	local args=(serve --config "$dir/tableproxy.yaml" --listen "127.0.0.1:$port" --backend "127.0.0.1:$DB_PORT"
		--admin-user sbtest:sbtest --data-dir "$dir/data" --node-id "n$i" --raft-listen "127.0.0.1:$raft")
	[[ -z "$join" ]] || args+=(--join "$join")
	"${START_BIN:-$PROXY_BIN}" "${args[@]}" </dev/null >"$dir/proxy.log" 2>&1 &
	PIDS+=($!)
	deadline=$((SECONDS + 30))
	until mysql_at "$port" -e 'SELECT 1' >/dev/null 2>&1; do
		((SECONDS < deadline)) || { tail -n 20 "$dir/proxy.log" >&2; die "proxy n$i did not start"; }
		sleep 0.3
	done
}

# wait_ready PORT TABLE: until TABLE is ready in that proxy's cached_tables.
wait_ready() {
	local port=$1 table=$2 deadline=$((SECONDS + 60))
	until [[ "$(mysql_at "$port" -N -e "SELECT state FROM tableproxy.cached_tables WHERE table_name = '$table'" 2>/dev/null)" == ready ]]; do
		((SECONDS < deadline)) || die "$table not ready on port $port after 60 s"
		sleep 0.2
	done
}

# wait_gone PORT TABLE: until TABLE is no longer in that proxy's cached_tables.
wait_gone() {
	local port=$1 table=$2 deadline=$((SECONDS + 30))
	while [[ -n "$(mysql_at "$port" -N -e "SELECT state FROM tableproxy.cached_tables WHERE table_name = '$table'" 2>/dev/null)" ]]; do
		((SECONDS < deadline)) || die "$table still cached on port $port after 30 s"
		sleep 0.2
	done
}

# start_cluster FIRST: proxies FIRST..FIRST+2 (START_BIN) as one cluster;
# sets LEADER, LEADER_PORT and VIA_PORT (the member the clients use).
start_cluster() {
	local first=$1 deadline follower
	start_proxy "$first"
	start_proxy $((first + 1)) "127.0.0.1:$((BASE_PORT + 10 + first))"
	start_proxy $((first + 2)) "127.0.0.1:$((BASE_PORT + 10 + first))"
	deadline=$((SECONDS + 30))
	until [[ "$(mysql_at "$((BASE_PORT + first))" -N -e "SELECT id FROM tableproxy.cluster_members" 2>/dev/null | wc -l)" == 3 ]]; do
		((SECONDS < deadline)) || die "the cluster of proxies $first-$((first + 2)) did not reach three members"
		sleep 0.3
	done
	LEADER="$(mysql_at "$((BASE_PORT + first))" -N -e "SELECT id FROM tableproxy.cluster_members WHERE leader = 'YES'")"
	LEADER_PORT=$((BASE_PORT + ${LEADER#n}))
	follower=$((BASE_PORT + first + 1))
	((follower != LEADER_PORT)) || follower=$((BASE_PORT + first + 2))
	VIA_PORT=$follower
	[[ "$VIA" == follower ]] || VIA_PORT=$LEADER_PORT
	log "leader $LEADER (port $LEADER_PORT); clients go through the $VIA on port $VIA_PORT"
}

log "starting a cluster of three proxies (ports $((BASE_PORT + 1))-$((BASE_PORT + 3)))"
start_cluster 1

mysql_at "$VIA_PORT" -e "ALTER TABLE wkv CACHE; ALTER TABLE sbtest1 CACHE"
for i in 1 2 3; do
	wait_ready "$((BASE_PORT + i))" wkv
	wait_ready "$((BASE_PORT + i))" sbtest1
done

# A second cluster, proxies 5-7, of the build to compare with.
if [[ -n "$COMPARE_BIN" ]]; then
	((WRITES)) || die "--compare-bin goes with --writes"
	log "starting a second cluster of $(basename "$COMPARE_BIN") (ports $((BASE_PORT + 5))-$((BASE_PORT + 7)))"
	saved=("$LEADER" "$LEADER_PORT" "$VIA_PORT")
	START_BIN="$COMPARE_BIN" start_cluster 5
	VIA_PORT2=$VIA_PORT
	LEADER=${saved[0]} LEADER_PORT=${saved[1]} VIA_PORT=${saved[2]}
	mysql_at "$VIA_PORT2" -e "ALTER TABLE wkv2 CACHE"
	for i in 5 6 7; do
		wait_ready "$((BASE_PORT + i))" wkv2
	done
fi

OUT="$BENCH_DIR/results-$(date -u +%Y%m%dT%H%M%SZ).md"
{
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo),"
	echo "MariaDB $(mysql_root -N -e 'SELECT VERSION()'), $(sysbench --version), proxy $REV, load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
	DISK_START="$(disk)"
	echo "Disk at start: $DISK_START."
	echo
	echo "\`bench/cluster.sh $ARGS\`: clients through the $VIA of a three-proxy cluster."
} >"$OUT"

median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.2f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
pct_line() { printf '| %s | %s | %s | %s | %s | %s |\n' "$@"; }

# --- writes --------------------------------------------------------------

if ((WRITES)); then
	{
		echo
		echo "### UPDATE latency: cached table vs uncached table"
		echo
		echo "One connection, single-row UPDATEs alternating between \`wkv\` (cached) and \`wplain\` (not cached), 100 rows each, $WRITES_N per table and pattern."
		echo "back-to-back: no pause; spaced: $GAP after each statement (longer than the 20 ms an intent lingers, so every cached write opens its own)."
		echo
		echo "| pattern | table | p50 ms | p90 ms | p99 ms | max ms |"
		echo "|---|---|---:|---:|---:|---:|"
	} >>"$OUT"
	for pattern in back-to-back spaced; do
		gap=0
		[[ "$pattern" == back-to-back ]] || gap=$GAP
		targets=(-dsn "sbtest:sbtest@tcp(127.0.0.1:$VIA_PORT)/sbtest" -tables wkv,wplain)
		[[ -z "$COMPARE_BIN" ]] || targets+=(-label "$REV" -dsn "sbtest:sbtest@tcp(127.0.0.1:$VIA_PORT2)/sbtest"
			-tables wkv2,wplain -label "$(basename "$COMPARE_BIN")")
		over_all="$LOG_DIR/writes-$pattern-over.tsv"
		: >"$over_all"
		for ((rep = 1; rep <= WRITES_REPEAT; rep++)); do
			name=$pattern
			((WRITES_REPEAT == 1)) || name="$pattern #$rep"
			log "writes, $name"
			tsv="$LOG_DIR/writes-$pattern-$rep.tsv"
			"$BENCH_DIR/writelat" "${targets[@]}" -n "$WRITES_N" -gap "$gap" >"$tsv"
			while IFS=$'\t' read -r table n p50 p90 p99 max; do
				pct_line "$name" "$table" "$p50" "$p90" "$p99" "$max" >>"$OUT"
			done <"$tsv"
			# One difference per cluster: its cached table (wkv*) against
			# its wplain; "ms<TAB>label", label empty with one cluster (last:
			# read trims a leading tab).
			awk -F'\t' '
				{ label = ""; table = $1 }
				table ~ /\// { label = table; sub(/\/.*/, "", label); sub(/.*\//, "", table) }
				table ~ /^wkv/ { c[label] = $5; order[++n] = label }
				table == "wplain" { u[label] = $5 }
				END { for (i = 1; i <= n; i++) { l = order[i]; printf "%.2f\t%s\n", c[l] - u[l], l } }
			' "$tsv" | tee -a "$over_all" | while IFS=$'\t' read -r over label; do
				echo "| $name | **p99 cached - uncached${label:+ ($label)}** | | | **$over** | |" >>"$OUT"
			done
		done
		if ((WRITES_REPEAT > 1)); then
			cut -f2 "$over_all" | awk '!seen[$0]++' | while IFS= read -r label; do
				diffs="$(awk -F'\t' -v l="$label" '$2 == l { print $1 }' "$over_all")"
				echo "| $pattern | **p99 cached - uncached${label:+ ($label)}, median of $WRITES_REPEAT** | | | **$(median <<<"$diffs")** ($(sort -g <<<"$diffs" | head -1) to $(sort -g <<<"$diffs" | tail -1)) | |" >>"$OUT"
			done
		fi
	done
	# The floor of a lone cached write (the spaced pattern): its intent is
	# one Raft commit, an fsync on the leader then the follower's append
	# and fsync, plus 1 ms for the messages and the revocations. fsync p99:
	# the mean of the probes just before and just after the writes.
	DISK_WRITES="$(disk)"
	p0="$(fsync_p99 "$DISK_START")" p1="$(fsync_p99 "$DISK_WRITES")"
	floor="$(awk -v a="$p0" -v b="$p1" 'BEGIN { printf "%.2f", 2 * (a + b) / 2 + 1 }')"
	of=""
	((WRITES_REPEAT == 1)) || of=", median of $WRITES_REPEAT"
	{
		echo
		echo "Disk right after the writes: $DISK_WRITES."
		echo
		echo "Floor of a lone cached write (spaced): 2 x fsync p99 + 1 ms = **$floor ms**, with the mean fsync p99 of the probes before ($p0 ms) and after ($p1 ms) the writes."
		echo
		echo "| cluster | added p99 ms (spaced, cached - uncached$of) | floor ms | **added / floor** | target: added <= floor |"
		echo "|---|---:|---:|---:|---|"
	} >>"$OUT"
	cut -f2 "$LOG_DIR/writes-spaced-over.tsv" | awk '!seen[$0]++' | while IFS= read -r label; do
		added="$(awk -F'\t' -v l="$label" '$2 == l { print $1 }' "$LOG_DIR/writes-spaced-over.tsv" | median)"
		awk -v c="${label:-$REV}" -v a="$added" -v f="$floor" 'BEGIN {
			printf "| %s | %.2f | %.2f | **%.2f** | %s |\n", c, a, f, a / f, (a <= f) ? "met" : "not met"
		}' >>"$OUT"
	done
fi

# --- sysbench ------------------------------------------------------------

# run_sb NAME PORT WORKLOAD [ARGS...]: one sysbench run; sets QPS, TPS, P95.
run_sb() {
	local name=$1 port=$2 workload=$3 out
	shift 3
	out="$LOG_DIR/$name.log"
	sysbench "$workload" "${SB_COMMON[@]}" --mysql-port="$port" --threads="$THREADS" --time="$TIME" "$@" run >"$out" 2>&1 ||
		die "sysbench $name failed (log: $out)"
	QPS="$(awk '$1 == "queries:" { gsub(/\(/, "", $3); print $3; exit }' "$out")"
	TPS="$(awk '$1 == "transactions:" { gsub(/\(/, "", $3); print $3; exit }' "$out")"
	P95="$(awk '/95th percentile:/ { print $3; exit }' "$out")"
	log "$name: $QPS qps, $TPS tps, p95 $P95 ms"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b / a }'; }

if ((READS)); then
	log "starting a single-node proxy (port $((BASE_PORT + 4))) for comparison"
	start_proxy 4
	mysql_at "$((BASE_PORT + 4))" -e "ALTER TABLE sbtest1 CACHE"
	wait_ready "$((BASE_PORT + 4))" sbtest1
	{
		echo
		echo "### Cached reads: one member of the cluster vs a single-node proxy"
		echo
		echo "sysbench, $THREADS threads, ${TIME} s per run, sbtest1 ($TABLE_SIZE rows) cached in both; the other two members idle. Median of $REPEAT repetitions, single-node and cluster runs back to back each time."
		echo
		echo "| workload | ps | single-node qps | cluster member qps | **ratio** (range) |"
		echo "|---|---|---:|---:|---:|"
	} >>"$OUT"
	for workload in oltp_point_select oltp_read_only; do
		for ps in auto disable; do
			single=() member=() ratios=()
			for ((rep = 1; rep <= REPEAT; rep++)); do
				run_sb "$workload-$ps-single-$rep" "$((BASE_PORT + 4))" "$workload" --db-ps-mode="$ps"
				s=$QPS
				run_sb "$workload-$ps-cluster-$rep" "$VIA_PORT" "$workload" --db-ps-mode="$ps"
				single+=("$s") member+=("$QPS") ratios+=("$(ratio "$s" "$QPS")")
			done
			range="$(printf '%s\n' "${ratios[@]}" | sort -g | sed -n '1p;$p' | paste -sd-)"
			echo "| $workload | $ps | $(printf '%s\n' "${single[@]}" | median) | $(printf '%s\n' "${member[@]}" | median) | **$(printf '%s\n' "${ratios[@]}" | median)** ($range) |" >>"$OUT"
		done
	done
	hits="$(mysql_at "$VIA_PORT" -N -e "SELECT hits, pass_throughs FROM tableproxy.cached_tables WHERE table_name = 'sbtest1'")"
	echo >>"$OUT"
	echo "sbtest1 on the cluster member after the runs: hits, pass_throughs = ${hits//$'\t'/, }." >>"$OUT"
fi

if ((RW)); then
	{
		echo
		echo "### oltp_read_write --point_selects 10 through the cluster: cached vs uncached"
		echo
		echo "sysbench, $THREADS threads, ${TIME} s per run, through the $VIA; sbtest1 cached (\`ALTER TABLE sbtest1 CACHE\`) or not (\`NOCACHE\`), switched once per repetition; median of $REPEAT."
		echo
		echo "| ps | uncached tps | cached tps | **tps ratio** (range) | uncached p95 ms | cached p95 ms |"
		echo "|---|---:|---:|---:|---:|---:|"
	} >>"$OUT"
	state=cached
	for ps in auto disable; do
		unc=() cac=() ratios=() up=() cp=()
		for ((rep = 1; rep <= REPEAT; rep++)); do
			for _ in 1 2; do
				run_sb "rw-ps10-$ps-$state-$rep" "$VIA_PORT" oltp_read_write --point_selects=10 --db-ps-mode="$ps"
				if [[ "$state" == cached ]]; then
					ct=$TPS cp+=("$P95")
					mysql_at "$VIA_PORT" -e "ALTER TABLE sbtest1 NOCACHE"
					for i in 1 2 3; do wait_gone "$((BASE_PORT + i))" sbtest1; done
					state=uncached
				else
					ut=$TPS up+=("$P95")
					mysql_at "$VIA_PORT" -e "ALTER TABLE sbtest1 CACHE"
					for i in 1 2 3; do wait_ready "$((BASE_PORT + i))" sbtest1; done
					state=cached
				fi
			done
			unc+=("$ut") cac+=("$ct") ratios+=("$(ratio "$ut" "$ct")")
		done
		range="$(printf '%s\n' "${ratios[@]}" | sort -g | sed -n '1p;$p' | paste -sd-)"
		echo "| $ps | $(printf '%s\n' "${unc[@]}" | median) | $(printf '%s\n' "${cac[@]}" | median) | **$(printf '%s\n' "${ratios[@]}" | median)** ($range) | $(printf '%s\n' "${up[@]}" | median) | $(printf '%s\n' "${cp[@]}" | median) |" >>"$OUT"
	done
fi

echo >>"$OUT"
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg). Disk at the end: $(disk)." >>"$OUT"
cat "$OUT"
log "results: $OUT"
