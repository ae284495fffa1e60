#!/usr/bin/env bash
# bench.sh OLD_REF ROUNDS BENCHSTAT...
#
# Writes docs/bench/root.txt and docs/bench/peers.txt (make bench).
#
# The root's benchmarks run from two test binaries in one run: the old
# one, built from OLD_REF in a detached worktree (removed on exit), and
# the new one, built from the working tree. Each round runs the old
# binary, then the new one, then the peers' binary, so that a noisy
# minute hurts both sides of every comparison alike; root.txt holds
# benchstat's old-versus-new tables, peers.txt one column per
# implementation. Only the benchmarks both root binaries ran are
# compared; those only one of them has are named in root.txt.
#
# BENCHTIME, when set, is each benchmark's -test.benchtime (a quick look:
# BENCHTIME=100x); figures come from the default.
# The environment's GO is the go command (default: go). The first line
# of each file is the figure header every make target writes (the
# command, the date, the commit, the Go version).
set -euo pipefail

old_ref=$1
rounds=$2
shift 2
benchstat=("$@")
go=${GO:-go}
root=$(git rev-parse --show-toplevel)
cd "$root"

work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/old" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

old_commit=$(git rev-parse --short "$old_ref")
git worktree add --detach --quiet "$work/old" "$old_ref"
(cd "$work/old" && $go test -c -o "$work/old.test" .)
$go test -c -o "$work/new.test" .
(cd bench && $go test -c -o "$work/peers.test" .)

root_bench='RoundTrip|Budget'
bt=()
if [ -n "${BENCHTIME:-}" ]; then bt=(-test.benchtime "$BENCHTIME"); fi
for i in $(seq "$rounds"); do
	"$work/old.test" -test.run '^$' -test.bench "$root_bench" -test.benchmem "${bt[@]}" >>"$work/old.txt"
	"$work/new.test" -test.run '^$' -test.bench "$root_bench" -test.benchmem "${bt[@]}" >>"$work/new.txt"
	"$work/peers.test" -test.run '^$' -test.bench . -test.benchmem "${bt[@]}" >>"$work/peers.txt"
done

# names lists the benchmark names a result file holds, one a line.
names() { grep -oE '^Benchmark[^ 	]+' "$1" | sort -u; }
names "$work/old.txt" >"$work/old.names"
names "$work/new.txt" >"$work/new.names"
comm -12 "$work/old.names" "$work/new.names" >"$work/both.names"
# keep leaves the lines of a result file that are not benchmark results,
# and the results of the benchmarks both binaries ran.
keep() { awk 'NR==FNR { both[$1]; next } !/^Benchmark/ || ($1 in both)' "$work/both.names" "$1"; }
keep "$work/old.txt" >"$work/old.kept"
keep "$work/new.txt" >"$work/new.kept"

header() { echo "# make bench, $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD), $($go version | cut -d' ' -f3-)"; }

mkdir -p docs/bench
{
	header
	old_name=$old_ref
	if [ "$old_ref" != "$old_commit" ]; then old_name="$old_ref ($old_commit)"; fi
	echo "# old: $old_name; new: the working tree; $rounds interleaved rounds"
	only_old=$(comm -23 "$work/old.names" "$work/new.names")
	only_new=$(comm -13 "$work/old.names" "$work/new.names")
	if [ -n "$only_old$only_new" ]; then
		echo "# compared: only the benchmarks both binaries ran; left out:"
		for n in $only_old; do echo "#   $n (old only)"; done
		for n in $only_new; do echo "#   $n (new only)"; done
	fi
	echo
	(cd "$work" && "${benchstat[@]}" old=old.kept new=new.kept)
} >docs/bench/root.txt.tmp
mv docs/bench/root.txt.tmp docs/bench/root.txt
cat docs/bench/root.txt

{
	header
	# name the sub-benchmarks case=…/impl=… so that benchstat puts
	# implementations side by side
	sed -E 's#^(BenchmarkPeers[A-Za-z]*)/([a-z]+)/([a-z]+)-#\1/case=\2/impl=\3-#' "$work/peers.txt" | "${benchstat[@]}" -col /impl -
} >docs/bench/peers.txt.tmp
mv docs/bench/peers.txt.tmp docs/bench/peers.txt
cat docs/bench/peers.txt
