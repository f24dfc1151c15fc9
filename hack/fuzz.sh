#!/usr/bin/env bash
# Fuzzes one target:
#
#   hack/fuzz.sh PACKAGE TARGET FUZZTIME MINIMIZETIME     e.g. hack/fuzz.sh ./convert FuzzJUnit 5s 5s
#
# Go 1.26's fuzzing coordinator can fail a run as -fuzztime ends, with a bare
# "context deadline exceeded" and no failing input (go.dev/issue/75804, fixed in
# Go 1.27): it happens on a loaded machine. A run that fails so, and leaves nothing
# new under PACKAGE/testdata/fuzz/TARGET, is run once more, and that run decides.
# Any other failure, and a failing input written, fails at once.
set -euo pipefail

if [[ $# -ne 4 ]]; then
	echo "usage: $0 PACKAGE TARGET FUZZTIME MINIMIZETIME" >&2
	exit 2
fi
pkg=$1 target=$2 fuzztime=$3 minimize=$4
go=${GO:-go}
corpus="$pkg/testdata/fuzz/$target"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

for try in 1 2; do
	before=$(ls "$corpus" 2>/dev/null || true)
	cmd=("$go" test -run '^$' -fuzz "^$target\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" "$pkg")
	echo "${cmd[*]}"
	if "${cmd[@]}" 2>&1 | tee "$log"; then
		exit 0
	fi
	after=$(ls "$corpus" 2>/dev/null || true)
	if [[ $try -eq 1 && "$before" == "$after" ]] &&
		grep -A1 -- "^--- FAIL: $target " "$log" | tail -n1 | grep -qx '[[:space:]]*context deadline exceeded'; then
		echo "fuzz.sh: $target failed with Go's fuzzing deadline race (go.dev/issue/75804) and no failing input; running it once more" >&2
		continue
	fi
	exit 1
done
