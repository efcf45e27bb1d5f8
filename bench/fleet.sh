#!/usr/bin/env bash
# A fleet of sidecars: three voters and N non-voter sidecars on loopback in
# front of one MariaDB, each proxy with its own data dir and a generated
# node id, as pods get (see bench/README.md, "Fleet").
#
#   bench/fleet.sh                        # N = 0, 10, 30, then 5 min of churn at 30 (~15 min)
#   bench/fleet.sh --sidecars 0,3 --churn 30 --writes-n 50    # a quick look
#   bench/fleet.sh --floor --repeat 3 --churn 0 --stall 0 --leader-loss 0 --big-rows 0
#                                         # the added write p99 against its floor
#
# For each N, in one run: each proxy's idle RSS and the leader's idle CPU
# (over --idle seconds, nothing running), then lone cached writes through a
# sidecar (a voter when N = 0), spaced by --gap, alternating with the same
# write to an uncached table: p50 and p99 of each, and what caching adds.
# With --floor, after each such run, the floor of the write's fan-out
# (bench/fanoutfloor): one leader sending a 200-byte message to N + 2
# follower processes and waiting for every acknowledgement, as many rounds
# as writes, --gap apart. --repeat R runs the writes (and the floor) R
# times at each N, in turn; the last lines compare, per repetition, the
# largest N with the first.
# Then churn at the last N: every --churn-every seconds a random sidecar is
# killed (kill -9 and SIGTERM in turn) and a new one (fresh data dir, id
# and address) started, for --churn seconds, while a client reads and
# writes cached rows through random sidecars; the membership's size is
# sampled every 2 s, and once more after --remove-dead-after.
#
# Before the churn, at the last N (bench/fleetprobe): one sidecar paused
# with SIGSTOP for --stall seconds while writes go through another (what
# the first write and the later ones wait; once resumed, no stale read and
# how soon it answers from memory again); then the leader killed with
# kill -9 (how long each sidecar goes without answering from memory, and
# a write through the new leader), the voter then restarted. After the
# churn: --big-rows rows in a table cached everywhere, and each proxy's
# RSS with it.
#
# Options: --sidecars LIST (0,10,30), --idle SEC (10), --writes-n N (200
# per table), --gap DUR (100ms), --churn SEC (300; 0: none), --churn-every
# SEC (3), --remove-dead-after DUR (30s), --stall SEC (5; 0: none),
# --leader-loss 0|1 (1), --big-rows N (100000; 0: none), --floor (off),
# --repeat R (1), --profile SEC (0: none; else CPU profiles of the leader
# at each N: idle, after the idle measurement, in logs/leader-idle-N.pprof,
# and during lone cached writes --gap apart through the same proxy, after
# the measured ones, in logs/leader-writes-N.pprof), --proxy-bin PATH
# (default: build bin/tableproxy).
#
# Environment: TABLEPROXY_RUN_DIR, TABLEPROXY_MARIADB_PORT as for
# bench/run.sh; TABLEPROXY_BENCH_FLEET_PORT (6500): voters listen on that
# port + 1..3 (Raft + 101..103, /metrics + 301..303, /debug/pprof + 311..313),
# sidecar k on + 200 + 2k (Raft + 201 + 2k).
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init fleet
LOG_DIR="$BENCH_DIR/logs"
BASE_PORT="${TABLEPROXY_BENCH_FLEET_PORT:-6500}"


SIDECARS=0,10,30 IDLE=10 WRITES_N=200 GAP=100ms CHURN=300 CHURN_EVERY=3 DEAD_AFTER=30s PROXY_BIN=""
STALL=5 LEADER_LOSS=1 BIG_ROWS=100000 PROFILE=0 FLOOR=0 REPEAT=1
ARGS="$*"
while (($#)); do
	case "$1" in
	--sidecars) SIDECARS=$2; shift ;;
	--idle) IDLE=$2; shift ;;
	--writes-n) WRITES_N=$2; shift ;;
	--gap) GAP=$2; shift ;;
	--churn) CHURN=$2; shift ;;
	--churn-every) CHURN_EVERY=$2; shift ;;
	--remove-dead-after) DEAD_AFTER=$2; shift ;;
	--stall) STALL=$2; shift ;;
	--leader-loss) LEADER_LOSS=$2; shift ;;
	--big-rows) BIG_ROWS=$2; shift ;;
	--profile) PROFILE=$2; shift ;;
	--floor) FLOOR=1 ;;
	--repeat) REPEAT=$2; shift ;;
	--proxy-bin) PROXY_BIN=$2; shift ;;
	-h | --help) sed -n '2,49p' "$0"; exit 0 ;;
	*) die "unknown option $1" ;;
	esac
	shift
done
IFS=, read -ra NS <<<"$SIDECARS"
for c in mariadb go; do
	command -v "$c" >/dev/null 2>&1 || die "$c is required (bench/run.sh installs mariadb-client)"
done

# --- processes -----------------------------------------------------------

# PID[key], PORT[key]: each running proxy, by key (v1..v3, s<k>).
declare -A PID=() PORT=()
SIDES=() # keys of the running sidecars
NEXT=0   # the next sidecar's k
STARTED_DB=0
CLIENT_PID=""
cleanup() {
	local rc=$? key
	trap - EXIT INT TERM
	[[ -z "$CLIENT_PID" ]] || kill "$CLIENT_PID" 2>/dev/null || true
	for key in "${!PID[@]}"; do
		kill -CONT "${PID[$key]}" 2>/dev/null || true
		kill -TERM "${PID[$key]}" 2>/dev/null || true
	done
	wait 2>/dev/null || true
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

log "creating database sbtest, user sbtest, tables wkv (cached) and wplain"
sql="$(sbtest_sql)"
sql+="CREATE TABLE sbtest.wkv (id INT PRIMARY KEY, v INT NOT NULL); CREATE TABLE sbtest.wplain LIKE sbtest.wkv;"
sql+="USE sbtest; INSERT INTO sbtest.wkv SELECT seq, 0 FROM seq_1_to_100; INSERT INTO sbtest.wplain SELECT * FROM sbtest.wkv;"
mysql_root -e "$sql" || die "could not create database sbtest"

if [[ -z "$PROXY_BIN" ]]; then
	log "building bin/tableproxy"
	(cd "$ROOT" && go build -o bin/tableproxy ./cmd/tableproxy)
	PROXY_BIN="$ROOT/bin/tableproxy"
	REV="$(cd "$ROOT" && git rev-parse --short HEAD)$(cd "$ROOT" && git diff --quiet HEAD -- . || echo +dirty)"
else
	REV="$(basename "$PROXY_BIN")"
fi
(cd "$ROOT" && go build -o "$BENCH_DIR/writelat" ./bench/writelat && go build -o "$BENCH_DIR/fsyncprobe" ./bench/fsyncprobe &&
	go build -o "$BENCH_DIR/fleetprobe" ./bench/fleetprobe && go build -o "$BENCH_DIR/fanoutfloor" ./bench/fanoutfloor)
disk() { "$BENCH_DIR/fsyncprobe" -dir "$BENCH_DIR" -n 100 -gap 20ms; }

JOIN="127.0.0.1:$((BASE_PORT + 101))"

# launch KEY PORT RAFT [FLAGS...]: a proxy in the background, its data dir
# fresh unless it exists; returns once it answers.
launch() {
	local key=$1 port=$2 raft=$3 deadline
	shift 3
	local dir="$BENCH_DIR/$key"
	mkdir -p "$dir/data"
	printf '%s\n' "shutdown_timeout: 5s" "plugins:" "  - name: cache" >"$dir/tableproxy.yaml"
	"$PROXY_BIN" serve --config "$dir/tableproxy.yaml" --listen "127.0.0.1:$port" --backend "127.0.0.1:$DB_PORT" \
		--admin-user sbtest:sbtest --data-dir "$dir/data" --raft-listen "127.0.0.1:$raft" \
		--remove-dead-after "$DEAD_AFTER" "$@" </dev/null >"$dir/proxy.log" 2>&1 &
	PID[$key]=$!
	PORT[$key]=$port
	deadline=$((SECONDS + 60))
	until mysql_at "$port" -e 'SELECT 1' >/dev/null 2>&1; do
		((SECONDS < deadline)) || { tail -n 20 "$dir/proxy.log" >&2; die "proxy $key did not start"; }
		kill -0 "${PID[$key]}" 2>/dev/null || { tail -n 20 "$dir/proxy.log" >&2; die "proxy $key exited"; }
		sleep 0.2
	done
}

# add_sidecar: a new non-voter, with a fresh data dir (so a new node id)
# and a new address, joining through a voter.
add_sidecar() {
	local k=$NEXT
	NEXT=$((NEXT + 1))
	launch "s$k" $((BASE_PORT + 200 + 2 * k)) $((BASE_PORT + 201 + 2 * k)) --join "$JOIN" --raft-nonvoter
	SIDES+=("s$k")
}

# members PORT: the membership's size as that proxy sees it, and how many
# of them are live ("size live").
members() {
	mysql_at "$1" -N -e "SELECT state FROM tableproxy.cluster_members" 2>/dev/null |
		awk '{ n++ } $1 == "live" { l++ } END { printf "%d %d\n", n, l }'
}

# wait_ready KEY [TABLE [SEC]]: until TABLE (wkv) is ready in that proxy's
# cached_tables.
wait_ready() {
	local port=${PORT[$1]} table=${2:-wkv} deadline=$((SECONDS + ${3:-60}))
	until [[ "$(mysql_at "$port" -N -e "SELECT state FROM tableproxy.cached_tables WHERE table_name = '$table'" 2>/dev/null)" == ready ]]; do
		((SECONDS < deadline)) || die "$table not ready on $1 after ${3:-60} s"
		sleep 0.2
	done
}

dsn_of() { echo "sbtest:sbtest@tcp(127.0.0.1:${PORT[$1]})/sbtest"; }

# leader: the key of the voter that leads, as the first running voter
# sees it.
leader() {
	local id key
	for key in v1 v2 v3; do
		[[ -n "${PID[$key]:-}" ]] || continue
		id="$(mysql_at "${PORT[$key]}" -N -e "SELECT id FROM tableproxy.cluster_members WHERE leader = 'YES'" 2>/dev/null || true)"
		echo "$id"
		return
	done
}

# cpu_ticks PID: utime + stime in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
rss_mb() { awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }

log "starting three voters"
for i in 1 2 3; do
	join=()
	((i == 1)) || join=(--join "$JOIN")
	launch "v$i" $((BASE_PORT + i)) $((BASE_PORT + 100 + i)) --node-id "v$i" "${join[@]}" \
		--metrics-listen "127.0.0.1:$((BASE_PORT + 300 + i))" --pprof-listen "127.0.0.1:$((BASE_PORT + 310 + i))"
done
mysql_at "${PORT[v1]}" -e "ALTER TABLE wkv CACHE"
for key in v1 v2 v3; do wait_ready "$key"; done

OUT="$BENCH_DIR/results-$(date -u +%Y%m%dT%H%M%SZ).md"
HZ="$(getconf CLK_TCK)"
{
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo),"
	echo "MariaDB $(mysql_root -N -e 'SELECT VERSION()'), proxy $REV, load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "Disk at start: $(disk)."
	echo
	echo "\`bench/fleet.sh $ARGS\`: three voters and N non-voter sidecars on loopback, one MariaDB; wkv (100 rows) cached."
	echo
	if ((FLOOR)); then
		echo "| N | rep | members | leader idle CPU % | voter RSS MB (max) | sidecar RSS MB (median / max) | via | cached p50 / p99 ms | uncached p50 / p99 ms | **added p50 / p99 ms** | floor: fan-out to N + 2, p50 / p99 ms |"
		echo "|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|"
	else
		echo "| N | rep | members | leader idle CPU % | voter RSS MB (max) | sidecar RSS MB (median / max) | via | cached p50 / p99 ms | uncached p50 / p99 ms | **added p50 / p99 ms** |"
		echo "|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"
	fi
} >"$OUT"

median() { sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print a[(NR + 1) / 2]; else printf "%.1f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# profile_leader KEY NAME: a CPU profile of the leader KEY for --profile
# seconds, in logs/NAME.pprof.
profile_leader() {
	curl -fsS -o "$LOG_DIR/$2.pprof" "http://127.0.0.1:$((BASE_PORT + 310 + ${1#v}))/debug/pprof/profile?seconds=$PROFILE" ||
		log "no profile"
}

ADDED=() # "N rep p50 p99", in the order measured
FLOORS=() # the same for the floor
for n in "${NS[@]}"; do
	while ((${#SIDES[@]} < n)); do add_sidecar; done
	log "N = $n: waiting for $((3 + n)) live members and wkv ready everywhere"
	deadline=$((SECONDS + 120))
	until [[ "$(members "${PORT[v1]}")" == "$((3 + n)) $((3 + n))" ]]; do
		((SECONDS < deadline)) || die "the membership did not reach $((3 + n)) live members: $(members "${PORT[v1]}")"
		sleep 0.5
	done
	for key in "${SIDES[@]}"; do wait_ready "$key"; done
	lead="$(leader)"
	[[ -n "$lead" ]] || die "no leader"
	log "N = $n: idle for $IDLE s (leader $lead)"
	sleep 2
	t0="$(cpu_ticks "${PID[$lead]}")"
	sleep "$IDLE"
	t1="$(cpu_ticks "${PID[$lead]}")"
	cpu="$(awk -v a="$t0" -v b="$t1" -v hz="$HZ" -v s="$IDLE" 'BEGIN { printf "%.1f", 100 * (b - a) / hz / s }')"
	if ((PROFILE > 0)); then
		log "N = $n: CPU profile of the idle leader ($PROFILE s)"
		profile_leader "$lead" "leader-idle-$n"
	fi
	vrss="$(for key in v1 v2 v3; do rss_mb "${PID[$key]}"; echo; done | sort -g | tail -1)"
	srss="-"
	if ((n > 0)); then
		all="$(for key in "${SIDES[@]}"; do rss_mb "${PID[$key]}"; echo; done)"
		srss="$(median <<<"$all") / $(sort -g <<<"$all" | tail -1)"
		via=${SIDES[0]}
	else
		via=v2
		[[ "$lead" != v2 ]] || via=v3
	fi
	for ((r = 1; r <= REPEAT; r++)); do
		log "N = $n, repetition $r: writes through $via"
		tsv="$LOG_DIR/writes-$n-$r.tsv"
		"$BENCH_DIR/writelat" -dsn "$(dsn_of "$via")" -tables wkv,wplain -n "$WRITES_N" -gap "$GAP" >"$tsv"
		read -r c50 c99 < <(awk -F'\t' '$1 == "wkv" { print $3, $5 }' "$tsv")
		read -r u50 u99 < <(awk -F'\t' '$1 == "wplain" { print $3, $5 }' "$tsv")
		a50="$(awk -v a="$c50" -v b="$u50" 'BEGIN { printf "%.2f", a - b }')"
		a99="$(awk -v a="$c99" -v b="$u99" 'BEGIN { printf "%.2f", a - b }')"
		ADDED+=("$n $r $a50 $a99")
		floor=""
		if ((FLOOR)); then
			log "N = $n, repetition $r: the fan-out floor, $((n + 2)) followers"
			"$BENCH_DIR/fanoutfloor" -followers $((n + 2)) -n "$WRITES_N" -gap "$GAP" >"$LOG_DIR/floor-$n-$r.tsv"
			read -r f50 f99 < <(awk -F'\t' '{ print $3, $5 }' "$LOG_DIR/floor-$n-$r.tsv")
			FLOORS+=("$n $r $f50 $f99")
			floor=" $f50 / $f99 |"
		fi
		echo "| $n | $r | $((3 + n)) | $cpu | $vrss | $srss | $via | $c50 / $c99 | $u50 / $u99 | **$a50 / $a99** |$floor" >>"$OUT"
	done
	if ((PROFILE > 0)); then
		log "N = $n: CPU profile of the leader during cached writes through $via ($PROFILE s)"
		"$BENCH_DIR/writelat" -dsn "$(dsn_of "$via")" -tables wkv -n 1000000 -gap "$GAP" >/dev/null &
		CLIENT_PID=$!
		profile_leader "$lead" "leader-writes-$n"
		kill "$CLIENT_PID" 2>/dev/null || true
		wait "$CLIENT_PID" 2>/dev/null || true
		CLIENT_PID=""
	fi
done

# compare LABEL FIGURES...: per repetition, the p99 at the last N over
# that at the first ("N rep p50 p99" each).
compare() {
	local label=$1
	shift
	printf '%s\n' "$@" | awk -v label="$label" -v n0="${NS[0]}" -v nl="${NS[-1]}" '
		$1 == n0 { a[$2] = $4 } $1 == nl { b[$2] = $4; reps[++k] = $2 }
		END {
			for (i = 1; i <= k; i++) {
				r = reps[i]
				printf "- %s, repetition %d: p99 at N = %d over N = %d: %.2f / %.2f ms = **%.2fx** (%+.2f ms)\n", label, r, nl, n0, b[r], a[r], (a[r] > 0) ? b[r] / a[r] : 0, b[r] - a[r]
			}
		}'
}
if ((${#NS[@]} > 1)); then
	{
		echo
		echo "Added p99 of a lone cached write (target: at most 1.5x)$( ((FLOOR)) && echo ", and its floor's round p99"):"
		echo
		compare "added by caching" "${ADDED[@]}"
		((FLOOR == 0)) || compare "floor, fan-out to N + 2" "${FLOORS[@]}"
	} >>"$OUT"
fi

# --- a paused sidecar, the leader lost -----------------------------------

if ((STALL > 0 && ${#SIDES[@]} > 1)); then
	victim=${SIDES[-1]}
	log "stall: $victim paused for $STALL s, writes through ${SIDES[0]}"
	line="$("$BENCH_DIR/fleetprobe" stall -writer "$(dsn_of "${SIDES[0]}")" -stalled "$(dsn_of "$victim")" -pid "${PID[$victim]}" \
		-pause "${STALL}s")" || die "stall probe failed: $line"
	{
		echo
		echo "### A paused sidecar (N = ${#SIDES[@]})"
		echo
		echo "$line (lease + margin: 2.25 s.)"
	} >>"$OUT"
fi

if ((LEADER_LOSS && ${#SIDES[@]} > 0)); then
	lead="$(leader)"
	[[ -n "$lead" ]] || die "no leader"
	dsns=()
	for key in "${SIDES[@]}"; do dsns+=(-sidecar "$(dsn_of "$key")"); done
	log "leader loss: kill -9 $lead, watching ${#SIDES[@]} sidecars"
	line="$("$BENCH_DIR/fleetprobe" leaderloss -writer "$(dsn_of "${SIDES[0]}")" -pid "${PID[$lead]}" "${dsns[@]}")" ||
		die "leader-loss probe failed: $line"
	wait "${PID[$lead]}" 2>/dev/null || true
	unset "PID[$lead]"
	{
		echo
		echo "### The leader lost (N = ${#SIDES[@]})"
		echo
		echo "$line (Election timeout 1 s, heartbeat timeout 500 ms.)"
	} >>"$OUT"
	# The killed voter again, with its data dir, joining through another.
	i=${lead#v}
	other=$((i % 3 + 1))
	launch "$lead" $((BASE_PORT + i)) $((BASE_PORT + 100 + i)) --node-id "$lead" --join "127.0.0.1:$((BASE_PORT + 100 + other))" \
		--metrics-listen "127.0.0.1:$((BASE_PORT + 300 + i))" --pprof-listen "127.0.0.1:$((BASE_PORT + 310 + i))"
	deadline=$((SECONDS + 60))
	until [[ "$(members "${PORT[v$other]}")" == "$((3 + ${#SIDES[@]})) $((3 + ${#SIDES[@]}))" ]]; do
		((SECONDS < deadline)) || die "the membership did not recover after the leader's restart: $(members "${PORT[v$other]}")"
		sleep 0.5
	done
	wait_ready "$lead"
fi

# --- churn ---------------------------------------------------------------

if ((CHURN > 0 && ${#SIDES[@]} > 0)); then
	# The client: through a random sidecar, a write and a read of a cached
	# row, over and over; errors counted (a sidecar killed under it).
	client() {
		local ok=0 bad=0 ports k
		while :; do
			mapfile -t ports <"$BENCH_DIR/side-ports"
			((${#ports[@]})) || { sleep 0.2; continue; }
			k=$((RANDOM % 100 + 1))
			if mysql_at "${ports[RANDOM % ${#ports[@]}]}" -e "UPDATE wkv SET v = v + 1 WHERE id = $k; SELECT v FROM wkv WHERE id = $k" >/dev/null 2>&1; then
				ok=$((ok + 1))
			else
				bad=$((bad + 1))
			fi
			echo "$ok $bad" >"$BENCH_DIR/client-count"
			sleep 0.05
		done
	}
	ports_file() { for key in "${SIDES[@]}"; do echo "${PORT[$key]}"; done >"$BENCH_DIR/side-ports"; }
	ports_file
	client &
	CLIENT_PID=$!
	log "churn: $CHURN s, one sidecar replaced every $CHURN_EVERY s (kill -9 and SIGTERM in turn)"
	sizes="$LOG_DIR/membership.tsv"
	echo -e "t_s\tmembers\tlive\trunning" >"$sizes"
	start=$SECONDS next_kill=$SECONDS kills=0 terms=0 maxm=0
	while ((SECONDS - start < CHURN)); do
		if ((SECONDS >= next_kill)); then
			i=$((RANDOM % ${#SIDES[@]}))
			victim=${SIDES[$i]}
			SIDES=("${SIDES[@]:0:i}" "${SIDES[@]:i+1}")
			ports_file
			if (((kills + terms) % 2)); then
				kill -TERM "${PID[$victim]}"
				terms=$((terms + 1))
			else
				kill -9 "${PID[$victim]}"
				kills=$((kills + 1))
			fi
			wait "${PID[$victim]}" 2>/dev/null || true
			unset "PID[$victim]"
			add_sidecar
			ports_file
			next_kill=$((SECONDS + CHURN_EVERY))
		fi
		read -r m l <<<"$(members "${PORT[v1]}")"
		((m > maxm)) && maxm=$m
		echo -e "$((SECONDS - start))\t$m\t$l\t$((3 + ${#SIDES[@]}))" >>"$sizes"
		sleep 2
	done
	kill "$CLIENT_PID" 2>/dev/null || true
	wait "$CLIENT_PID" 2>/dev/null || true
	CLIENT_PID=""
	read -r cok cbad <"$BENCH_DIR/client-count"
	read -r m_end l_end <<<"$(members "${PORT[v1]}")"
	dead_s="$(awk -v d="$DEAD_AFTER" 'BEGIN { v = d + 0; if (d ~ /ms$/) v /= 1000; else if (d ~ /m$/) v *= 60; print int(v) + 3 }')"
	log "churn over; waiting $dead_s s (remove-dead-after + 3 s)"
	sleep "$dead_s"
	read -r m_after l_after <<<"$(members "${PORT[v1]}")"
	# Reads everywhere: with no writes now, every sidecar answers from
	# memory (its hits go up over a few reads).
	hits=0
	for key in "${SIDES[@]}"; do
		wait_ready "$key"
		q="SELECT hits FROM tableproxy.cached_tables WHERE table_name = 'wkv'"
		h0="$(mysql_at "${PORT[$key]}" -N -e "$q")"
		h1="$(mysql_at "${PORT[$key]}" -N -e "SELECT v FROM wkv WHERE id = 1; SELECT v FROM wkv WHERE id = 2; $q" | tail -1)"
		((h1 > h0)) && hits=$((hits + 1))
	done
	{
		echo
		echo "### Churn at N = ${#SIDES[@]}"
		echo
		echo "$CHURN s, one sidecar replaced every $CHURN_EVERY s: $kills killed with kill -9, $terms stopped with SIGTERM, each replaced by a new one (fresh data dir, id and address); remove_dead_after $DEAD_AFTER."
		echo "A client wrote and read cached rows through random sidecars: $cok rounds, $cbad failed (mostly on a sidecar being killed)."
		echo
		echo "| | members | live |"
		echo "|---|---:|---:|"
		echo "| running proxies | $((3 + ${#SIDES[@]})) | |"
		echo "| largest membership during the churn | $maxm | |"
		echo "| at the end of the churn | $m_end | $l_end |"
		echo "| $dead_s s later | $m_after | $l_after |"
		echo
		echo "Sidecars answering reads of wkv from memory after the churn: $hits of ${#SIDES[@]}. Membership every 2 s: \`$sizes\`."
	} >>"$OUT"
fi

# --- a bigger table cached everywhere -----------------------------------

if ((BIG_ROWS > 0)); then
	log "caching wbig ($BIG_ROWS rows) on every proxy"
	mysql_root -e "USE sbtest; CREATE TABLE sbtest.wbig (id INT PRIMARY KEY, k INT NOT NULL, c CHAR(120) NOT NULL, pad CHAR(60) NOT NULL, KEY k (k));
		INSERT INTO sbtest.wbig SELECT seq, seq % 1000, CONCAT(MD5(seq), MD5(seq + 1), MD5(seq + 2)), CONCAT(MD5(-seq), '-pad') FROM seq_1_to_$BIG_ROWS; ANALYZE TABLE sbtest.wbig" >/dev/null ||
		die "could not create wbig"
	mysql_at "${PORT[v2]}" -e "ALTER TABLE wbig CACHE"
	for key in "${!PID[@]}"; do wait_ready "$key" wbig 300; done
	sleep 2
	mem="$(mysql_at "${PORT[v2]}" -N -e "SELECT memory_bytes FROM tableproxy.cached_tables WHERE table_name = 'wbig'")"
	vrss="$(for key in v1 v2 v3; do rss_mb "${PID[$key]}"; echo; done | sort -g | tail -1)"
	all="$(for key in "${SIDES[@]}"; do rss_mb "${PID[$key]}"; echo; done)"
	{
		echo
		echo "### RSS with a table cached"
		echo
		echo "wbig, $BIG_ROWS sysbench-like rows ($(mysql_root -N -e "SELECT ROUND((data_length + index_length) / 1048576, 1) FROM information_schema.tables WHERE table_schema = 'sbtest' AND table_name = 'wbig'") MB in InnoDB), cached on all $((3 + ${#SIDES[@]})) proxies ($(awk -v b="$mem" 'BEGIN { printf "%.1f", b / 1048576 }') MB by cached_tables.memory_bytes):"
		echo "2 s after the last load: voter RSS max $vrss MB; sidecar RSS median $(median <<<"$all") / max $(sort -g <<<"$all" | tail -1) MB."
	} >>"$OUT"
	# Go returns the loads' garbage to the kernel over a few minutes.
	sleep 60
	vrss="$(for key in v1 v2 v3; do rss_mb "${PID[$key]}"; echo; done | sort -g | tail -1)"
	all="$(for key in "${SIDES[@]}"; do rss_mb "${PID[$key]}"; echo; done)"
	echo "60 s later: voter RSS max $vrss MB; sidecar RSS median $(median <<<"$all") / max $(sort -g <<<"$all" | tail -1) MB." >>"$OUT"
fi

echo >>"$OUT"
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg). Disk at the end: $(disk)." >>"$OUT"
cat "$OUT"
log "results: $OUT"
