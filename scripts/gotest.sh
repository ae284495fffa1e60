#!/bin/sh
# gotest.sh runs `go test` with the arguments given ($GO, or go), printing
# what it prints, and, when a package fails, ends with what a reader of
# the last lines needs: the failures, the tests still running at a
# timeout, and the test code the goroutines were in (those blocked a
# minute or more first). A timeout's dump is long, and a log cut to its
# tail would otherwise lose all three.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# A pipe's status is its last command's: go test's goes through a file.
{ ${GO:-go} test "$@" 2>&1; echo $? >"$log.rc"; } | tee "$log"
rc=$(cat "$log.rc"); rm -f "$log.rc"
[ "$rc" = 0 ] && exit 0
echo "--- gotest.sh: what failed ---"
grep -E '^(--- FAIL|FAIL|panic:)' "$log" | head -40
awk '/running tests:/ {r=1; print; next} r && /^$/ {exit} r' "$log" | head -40
for age in long any; do
	echo "--- gotest.sh: test code in goroutines blocked ($age) ---"
	awk -v age="$age" '
		/^goroutine [0-9]+ \[/ {b = (age == "any" || $0 ~ /minutes\]:$/); next}
		/^$/ {b=0}
		b && /_test\.go:[0-9]+/ {print $1}' "$log" | sort | uniq -c | sort -rn | head -25
done
exit "$rc"
