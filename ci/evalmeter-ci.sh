#!/bin/sh
# evalmeter in a CI job: install a release binary checked against SHA256SUMS, submit the
# job's results through a session, and compare them with a baseline run.
#
# The GitHub Action (action.yml) and the GitLab CI template (ci/gitlab/evalmeter.yml) run
# this script; docs/ci.md describes it. POSIX sh, so that it runs in bash on GitHub's
# runners and in busybox or dash in small images. Configured by the environment:
#
#   EVALMETER_DOWNLOAD        base URL of a release: the files of `make dist` (required)
#   EVALMETER_CI_RESULTS      the results files, one per line (required)
#   EVALMETER_CI_FROM         their format (convert's --from; default auto)
#   EVALMETER_CI_SUBMIT       true (default), dry-run, or false
#   EVALMETER_CI_GATES        gate expressions of submit, one per line
#   EVALMETER_CI_ARGS         more flags of submit and convert, split on blanks
#   EVALMETER_CI_RESULT_FILE  where submit --save-result writes (default evalmeter-result.json)
#   EVALMETER_CI_BASELINE     the baseline run to compare with: a result or request file
#   EVALMETER_CI_BASELINE_REF on GitLab, without EVALMETER_CI_BASELINE: the branch whose
#                             last result-file artifact of this job is the baseline
#   EVALMETER_CI_MAX_DROP     compare --max-drop, in points (default 2)
#   EVALMETER_CI_FAIL_ON_INCONCLUSIVE  true: an inconclusive comparison fails the job
#   EVALMETER_CI_SUMMARY      auto (pull requests only), always or never: the Markdown in
#                             GitHub's job summary
#   EVALMETER_CI_OUT_DIR      where the comparison's files go (default .)
#   EVALMETER_CI_BIN_DIR      where the binary is installed
#   EVALMETER_CI_URL, EVALMETER_CI_API_KEY: when set, EVALMETER_URL and EVALMETER_API_KEY
#                             (an input left empty keeps the job's own variable)
#   EVALMETER_URL, EVALMETER_API_KEY, EVALMETER_ID_SALT: read by evalmeter itself.
#
# Exit status: evalmeter's. 1 or 2 when a run cannot be submitted or compared; 3 when a
# gate failed or compare found a regression; 4 when an inconclusive comparison fails the job.
set -eu

say() { printf 'evalmeter-ci: %s\n' "$*" >&2; }
die() {
  say "$*"
  exit 2
}

# fetch URL FILE [HEADER], with curl or with wget (busybox has wget, not curl).
fetch() {
  if command -v curl >/dev/null 2>&1; then
    curl -fsSL --retry 3 --proto '=https,http,file' ${3:+-H "$3"} -o "$2" "$1"
  elif command -v wget >/dev/null 2>&1; then
    wget -q ${3:+--header "$3"} -O "$2" "$1"
  else
    die "neither curl nor wget is installed: install one in the job's image"
  fi
}

sha256() {
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum "$1" | cut -d' ' -f1
  else
    shasum -a 256 "$1" | cut -d' ' -f1 # macOS
  fi
}

# platform prints the suffix of make dist's file names for this machine: linux-amd64, ...
platform() {
  case $(uname -s) in
  Linux) os=linux ;;
  Darwin) os=darwin ;;
  MINGW* | MSYS* | CYGWIN* | Windows_NT) os=windows ;;
  *) die "no evalmeter build for $(uname -s)" ;;
  esac
  case $(uname -m) in
  x86_64 | amd64) arch=amd64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) die "no evalmeter build for $(uname -m)" ;;
  esac
  if [ "$os" = windows ]; then
    echo "$os-$arch.exe"
  else
    echo "$os-$arch"
  fi
}

# install prints the path of the evalmeter binary of the release at EVALMETER_DOWNLOAD,
# downloaded and checked against the release's SHA256SUMS.
install_evalmeter() {
  base=${EVALMETER_DOWNLOAD:-}
  [ -n "$base" ] || die "set EVALMETER_DOWNLOAD (download-url) to where the evalmeter release is published"
  base=${base%/}
  bin_dir=${EVALMETER_CI_BIN_DIR:-${RUNNER_TEMP:-${TMPDIR:-/tmp}}/evalmeter-bin}
  mkdir -p "$bin_dir"
  fetch "$base/SHA256SUMS" "$bin_dir/SHA256SUMS" || die "cannot download $base/SHA256SUMS"
  suffix=$(platform)
  # make dist names its files evalmeter-VERSION-OS-ARCH; a release holds one version.
  line=$(grep -E "^[0-9a-f]{64}  evalmeter-[^ ]+-$suffix\$" "$bin_dir/SHA256SUMS" || true)
  [ -n "$line" ] || die "$base/SHA256SUMS lists no evalmeter build for $suffix"
  [ "$(printf '%s\n' "$line" | wc -l)" -eq 1 ] || die "$base/SHA256SUMS lists several builds for $suffix: publish one release per directory"
  want=${line%% *}
  name=${line##* }
  fetch "$base/$name" "$bin_dir/$name.part" || die "cannot download $base/$name"
  got=$(sha256 "$bin_dir/$name.part")
  if [ "$got" != "$want" ]; then
    rm -f "$bin_dir/$name.part"
    die "$name: SHA-256 $got, but SHA256SUMS says $want: the download is not the release; not running it"
  fi
  chmod 0755 "$bin_dir/$name.part"
  exe=evalmeter
  case $suffix in *.exe) exe=evalmeter.exe ;; esac
  mv "$bin_dir/$name.part" "$bin_dir/$exe"
  say "installed $name (SHA-256 $got) as $bin_dir/$exe"
  if [ -n "${GITHUB_PATH:-}" ]; then
    echo "$bin_dir" >>"$GITHUB_PATH" # later steps of the job find evalmeter too
  fi
  echo "$bin_dir/$exe"
}

# output NAME VALUE: a step output on GitHub Actions, nothing elsewhere.
output() {
  if [ -n "${GITHUB_OUTPUT:-}" ]; then
    echo "$1=$2" >>"$GITHUB_OUTPUT"
  fi
}

if [ -n "${EVALMETER_CI_URL:-}" ]; then export EVALMETER_URL="$EVALMETER_CI_URL"; fi
if [ -n "${EVALMETER_CI_API_KEY:-}" ]; then export EVALMETER_API_KEY="$EVALMETER_CI_API_KEY"; fi
unset EVALMETER_CI_API_KEY

# The settings are checked before anything is installed or posted.
from=${EVALMETER_CI_FROM:-auto}
submit=${EVALMETER_CI_SUBMIT:-true}
result_file=${EVALMETER_CI_RESULT_FILE:-evalmeter-result.json}
out_dir=${EVALMETER_CI_OUT_DIR:-.}
max_drop=${EVALMETER_CI_MAX_DROP:-2}
fail_inconclusive=${EVALMETER_CI_FAIL_ON_INCONCLUSIVE:-false}
summary=${EVALMETER_CI_SUMMARY:-auto}
case $submit in
true | dry-run | false) ;;
*) die "submit (EVALMETER_CI_SUBMIT) is \"$submit\": use true, dry-run or false" ;;
esac
case $max_drop in
'' | *[!0-9.]* | *.*.*) die "max-drop (EVALMETER_CI_MAX_DROP) is \"$max_drop\": give points, e.g. 2" ;;
esac
case $fail_inconclusive in
true | false) ;;
*) die "fail-on-inconclusive (EVALMETER_CI_FAIL_ON_INCONCLUSIVE) is \"$fail_inconclusive\": use true or false" ;;
esac
case $summary in
auto | always | never) ;;
*) die "summary (EVALMETER_CI_SUMMARY) is \"$summary\": use auto, always or never" ;;
esac
if [ -z "$(printf '%s' "${EVALMETER_CI_RESULTS:-}" | tr -d ' \n')" ]; then
  die "no results files: give this run's results (results), one per line"
fi

evalmeter=$(install_evalmeter)
"$evalmeter" version >&2

# gitlab_baseline downloads the baseline branch's last result of this job, with the job's
# token, to FILE; it fails when there is none yet.
gitlab_baseline() {
  ref=$(printf '%s' "$EVALMETER_CI_BASELINE_REF" | sed 's|%|%25|g; s|/|%2F|g; s|#|%23|g; s|?|%3F|g; s|&|%26|g')
  job=$(printf '%s' "${CI_JOB_NAME:-evalmeter}" | sed 's|%|%25|g; s| |%20|g; s|&|%26|g; s|#|%23|g')
  fetch "$CI_API_V4_URL/projects/$CI_PROJECT_ID/jobs/artifacts/$ref/raw/$result_file?job=$job" "$1" "JOB-TOKEN: ${CI_JOB_TOKEN:-}"
}

if [ -z "${EVALMETER_CI_BASELINE:-}" ] && [ -n "${EVALMETER_CI_BASELINE_REF:-}" ] && [ -n "${CI_API_V4_URL:-}" ]; then
  if [ "$EVALMETER_CI_BASELINE_REF" = "${CI_COMMIT_REF_NAME:-}" ]; then
    say "on $EVALMETER_CI_BASELINE_REF, the baseline branch: this result is the next baseline; nothing compared"
  else
    mkdir -p "$out_dir"
    if gitlab_baseline "$out_dir/evalmeter-baseline.json"; then
      EVALMETER_CI_BASELINE=$out_dir/evalmeter-baseline.json
      say "baseline: the last $result_file of job ${CI_JOB_NAME:-evalmeter} on $EVALMETER_CI_BASELINE_REF"
    else
      rm -f "$out_dir/evalmeter-baseline.json"
      say "warning: no $result_file of job ${CI_JOB_NAME:-evalmeter} on $EVALMETER_CI_BASELINE_REF to compare with (none yet, or its artifacts expired); nothing compared"
    fi
  fi
fi

# quote prints its argument as one word for eval.
quote() { printf "'%s' " "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }

# args prints, quoted for eval, the flags and files of submit ("gates") or of convert:
# the gates (one per line), the extra flags (split on blanks), "--" and the results
# files (one per line).
args() {
  newline='
'
  old_ifs=$IFS
  IFS=$newline
  if [ "${1:-}" = gates ]; then
    for g in ${EVALMETER_CI_GATES:-}; do
      if [ -n "$g" ]; then quote --gate && quote "$g"; fi
    done
  fi
  IFS=" 	$newline"
  for a in ${EVALMETER_CI_ARGS:-}; do
    quote "$a"
  done
  quote --
  IFS=$newline
  for f in ${EVALMETER_CI_RESULTS:-}; do
    if [ -n "$f" ]; then quote "$f"; fi
  done
  IFS=$old_ifs
}

status=0
candidate=
eval "set -- $(args gates)"
case $submit in
true)
  "$evalmeter" submit --from "$from" --save-result "$result_file" "$@" || status=$?
  case $status in 0 | 3) ;; *) exit "$status" ;; esac
  candidate=$result_file
  output result-file "$result_file"
  ;;
dry-run)
  "$evalmeter" submit --dry-run --from "$from" "$@" || status=$?
  case $status in 0 | 3) ;; *) exit "$status" ;; esac
  ;;
esac
if [ -z "$candidate" ] && [ -n "${EVALMETER_CI_BASELINE:-}" ]; then
  # Not posted: compare the request converted here.
  eval "set -- $(args)"
  mkdir -p "$out_dir"
  candidate=$out_dir/evalmeter-candidate.json
  "$evalmeter" convert --from "$from" "$@" >"$candidate" || exit $?
fi

if [ -n "${EVALMETER_CI_BASELINE:-}" ]; then
  if [ ! -f "$EVALMETER_CI_BASELINE" ]; then
    # The first run of a default branch has no baseline yet: not a failure.
    say "warning: no baseline at $EVALMETER_CI_BASELINE (the default branch's first result?); nothing compared"
    if [ -n "${GITHUB_ACTIONS:-}" ]; then
      echo "::warning title=evalmeter::no baseline at $EVALMETER_CI_BASELINE; nothing compared"
    fi
  else
    set -- --max-drop "$max_drop"
    if [ "$fail_inconclusive" = true ]; then
      set -- "$@" --fail-on-inconclusive
    fi
    mkdir -p "$out_dir"
    md=$out_dir/evalmeter-compare.md
    json=$out_dir/evalmeter-compare.json
    # Three outputs of the same comparison: its status is the same each time.
    cmp=0
    "$evalmeter" compare "$@" "$EVALMETER_CI_BASELINE" "$candidate" || cmp=$?
    case $cmp in 0 | 3 | 4) ;; *) exit "$cmp" ;; esac
    "$evalmeter" compare "$@" --output markdown "$EVALMETER_CI_BASELINE" "$candidate" >"$md" 2>/dev/null || true
    "$evalmeter" compare "$@" --output json "$EVALMETER_CI_BASELINE" "$candidate" >"$json" 2>/dev/null || true
    verdict=$(sed -n 's/^  "verdict": "\([a-z_]*\)",\{0,1\}$/\1/p' "$json")
    say "verdict: ${verdict:-unknown}; the comparison is in $md and $json"
    output verdict "$verdict"
    output markdown-file "$md"
    output json-file "$json"
    case $summary/${GITHUB_EVENT_NAME:-} in
    always/* | auto/pull_request | auto/pull_request_target) write_summary=1 ;;
    *) write_summary= ;;
    esac
    if [ -n "$write_summary" ] && [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
      cat "$md" >>"$GITHUB_STEP_SUMMARY"
    fi
    if [ "$cmp" -ne 0 ] && [ "$status" -ne 3 ]; then
      status=$cmp
    fi
  fi
fi
exit "$status"
