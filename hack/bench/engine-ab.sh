#!/usr/bin/env bash
# Compares the metrics engine's CPU time at a revision with the working
# tree's:
#
#   hack/bench/engine-ab.sh [REV]      REV defaults to HEAD; ROUNDS=3
#
# It builds internal/metrics' test binary at both (TestCPUTime, tag
# cputime: the least thread CPU time of 25 runs on each benchmark body)
# and runs the two in turn ROUNDS times, so that both see the same machine.
# On a shared machine wall-clock medians drift by more than most changes;
# the least CPU time of a thread does not. REV must have metrics.Meter
# (after 7a4987b); TestCPUTime is copied into it.
set -euo pipefail

rev=${1:-HEAD}
rounds=${ROUNDS:-3}
go=${GO:-go}
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$tmp/rev" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

git -C "$root" worktree add --quiet --detach "$tmp/rev" "$rev"
cp "$root/internal/metrics/cputime_test.go" "$tmp/rev/internal/metrics/"
# Each side is built as its binary is: with its own profile, where it has one.
pgo() { if [[ -f $1/cmd/evalmeter/default.pgo ]]; then echo "-pgo=$1/cmd/evalmeter/default.pgo"; else echo "-pgo=off"; fi; }
(cd "$tmp/rev" && GOFLAGS=-buildvcs=false "$go" test -c "$(pgo "$tmp/rev")" -tags cputime -o "$tmp/rev.test" ./internal/metrics)
(cd "$root" && GOFLAGS=-buildvcs=false "$go" test -c "$(pgo "$root")" -tags cputime -o "$tmp/tree.test" ./internal/metrics)

echo "thread CPU, least of 25 runs: $rev against the working tree, $rounds rounds"
for round in $(seq "$rounds"); do
	for side in rev tree; do
		dir="$root/internal/metrics"
		[[ $side == rev ]] && dir="$tmp/rev/internal/metrics"
		label=$rev
		[[ $side == tree ]] && label="tree"
		(cd "$dir" && "$tmp/$side.test" -test.run '^TestCPUTime$' -test.v) |
			sed -n "s/.*cputime /round $round  $(printf '%-10s' "$label") /p"
	done
done
