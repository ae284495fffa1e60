#!/usr/bin/env bash
# apicheck.sh APIDIFF MODULE_DIR...
#
# For each released module, compares its exported API in the working tree
# with its last release tag and fails on an incompatible change. The root
# module's tags are vX.Y.Z; a module in a subdirectory is tagged with its
# directory as prefix (contrib/redisretry/v0.1.0), as the go command
# expects. A module without a tag yet has nothing to break: its whole API
# is new, and the check says so.
#
# An intended break of a v0 module (allowed by semantic versioning before
# v1) passes with APICHECK_ALLOW_INCOMPATIBLE=1; say so in the release
# notes.
set -euo pipefail

apidiff=$1
shift
root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/old" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

status=0
for dir in "$@"; do
	dir=${dir#./}
	if [ "$dir" = . ] || [ -z "$dir" ]; then prefix=; dir=.; else prefix=$dir/; fi
	modpath=$(cd "$root/$dir" && go list -m)
	tag=$(git -C "$root" tag --list "${prefix}v[0-9]*" --sort=-v:refname | head -n 1)
	if [ -z "$tag" ]; then
		echo "apicheck $modpath: no ${prefix}vX.Y.Z tag yet: the whole API is new"
		continue
	fi
	git -C "$root" worktree remove --force "$work/old" >/dev/null 2>&1 || true
	git -C "$root" worktree add --quiet --detach "$work/old" "$tag"
	(cd "$work/old/$dir" && $apidiff -m -w "$work/old.api" "$modpath")
	changes=$(cd "$root/$dir" && $apidiff -m -incompatible "$work/old.api" "$modpath")
	if [ -z "$changes" ]; then
		echo "apicheck $modpath: compatible with $tag"
		continue
	fi
	echo "apicheck $modpath: incompatible with $tag:"
	echo "$changes"
	if [ "${APICHECK_ALLOW_INCOMPATIBLE:-}" != 1 ]; then status=1; fi
done
exit $status
