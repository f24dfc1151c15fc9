#!/bin/sh
# evalmeter in a CI job: install a release binary checked against SHA256SUMS, submit the
# job's results (or check them here, with a dry run), and compare them with a baseline run.
#
# The GitHub Action (action.yml) and the GitLab CI template (ci/gitlab/evalmeter.yml) run
# this script; docs/ci.md describes it. POSIX sh: it runs in dash and bash on GitHub's
# runners, in busybox in small images. Configured by the environment:
#
#   EVALMETER_DOWNLOAD        base URL of a release: the files of `make dist` (required)
#   EVALMETER_CI_RELEASE_SHA256  the SHA-256 of that release's SHA256SUMS, to pin it
#   EVALMETER_CI_RESULTS      the results files, one per line (required)
#   EVALMETER_CI_FROM         their format (convert's --from; default auto)
#   EVALMETER_CI_SUBMIT       true (default) posts them; dry-run checks them here
#   EVALMETER_CI_GATES        gate expressions of submit, one per line
#   EVALMETER_CI_ARGS         more flags of submit, split on blanks (e.g. --hash-ids --split)
#   EVALMETER_CI_RESULT_FILE  where submit --save-result writes (default evalmeter-result.json)
#   EVALMETER_CI_BASELINE     the baseline run to compare with: a result or request file
#   EVALMETER_CI_BASELINE_REF on GitLab, without EVALMETER_CI_BASELINE: the branch whose
#                             last result-file artifact of this job is the baseline
#   EVALMETER_CI_GITLAB_TOKEN on GitLab: a token with read_api that reads that artifact
#                             (else the job's CI_JOB_TOKEN, which only Premium accepts)
#   EVALMETER_CI_MAX_DROP     compare --max-drop, in points (default 2)
#   EVALMETER_CI_FAIL_ON_INCONCLUSIVE  true: an inconclusive comparison fails the job
#   EVALMETER_CI_SUMMARY      auto (pull requests), always or never: the Markdown in
#                             GitHub's job summary
#   EVALMETER_CI_OUT_DIR      where the comparison's files go (default .)
#   EVALMETER_CI_BIN_DIR      where the binary is installed
#   EVALMETER_CI_URL, EVALMETER_CI_API_KEY: when set, EVALMETER_URL and EVALMETER_API_KEY
#                             (an input left empty keeps the job's own variable)
#   EVALMETER_URL, EVALMETER_API_KEY, EVALMETER_ID_SALT: read by evalmeter itself.
#
# Exit status: 2 when a setting, the release or the baseline cannot be used; else
# evalmeter's: 1 or 2 when the results cannot be submitted or compared, 3 when a gate
# failed or compare found a regression, 4 when an inconclusive comparison fails the job.
set -eu

say() { printf 'evalmeter-ci: %s\n' "$*" >&2; }
die() {
  say "$*"
  exit 2
}
warn() {
  say "warning: $*"
  if [ -n "${GITHUB_ACTIONS:-}" ]; then
    printf '::warning title=evalmeter::%s\n' "$*"
  fi
}

# fetch URL FILE [HEADER], with curl or with wget (busybox has wget, not curl).
fetch() {
  if command -v curl >/dev/null 2>&1; then
    curl -fsSL -g --retry 3 --proto '=https,http,file' ${3:+-H "$3"} -o "$2" "$1"
  elif command -v wget >/dev/null 2>&1; then
    wget -q ${3:+--header "$3"} -O "$2" "$1"
  else
    die "neither curl nor wget is installed: install one in the job's image"
  fi
}

# http_status URL FILE [HEADER] fetches URL into FILE and prints the HTTP status,
# 000 when there was no answer.
http_status() {
  if command -v curl >/dev/null 2>&1; then
    curl -sSL -g --retry 3 --proto '=https,http' ${3:+-H "$3"} -o "$2" -w '%{http_code}' "$1" 2>/dev/null || true
  else
    code=$(wget -S ${3:+--header "$3"} -O "$2" "$1" 2>&1 | sed -n 's/^ *HTTP\/[0-9.]* \([0-9][0-9][0-9]\).*/\1/p' | tail -n 1)
    echo "${code:-000}"
  fi
}

# sha256 prints the SHA-256 of a file, read on stdin: given a path with a backslash
# (Windows runners), GNU sha256sum escapes its output line.
sha256() {
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum <"$1" | cut -d' ' -f1
  else
    shasum -a 256 <"$1" | cut -d' ' -f1 # macOS
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

# install_evalmeter prints the path of the evalmeter binary of the release at
# EVALMETER_DOWNLOAD, downloaded and checked against the release's SHA256SUMS.
install_evalmeter() {
  base=${EVALMETER_DOWNLOAD%/}
  case $base in
  https://* | http://127.* | http://localhost[:/]* | http://\[::1\]*) ;;
  http://*) warn "$base is plain HTTP: anyone on the way can change the release and its SHA256SUMS together; pin release-sha256" ;;
  *) die "download-url (EVALMETER_DOWNLOAD) \"$base\" is not an https:// URL" ;;
  esac
  bin_dir=${EVALMETER_CI_BIN_DIR:-${RUNNER_TEMP:-${TMPDIR:-/tmp}}/evalmeter-bin}
  mkdir -p "$bin_dir"
  fetch "$base/SHA256SUMS" "$bin_dir/SHA256SUMS" || die "cannot download $base/SHA256SUMS: is download-url a release made by make dist?"
  if [ -n "$pinned" ] && [ "$(sha256 "$bin_dir/SHA256SUMS")" != "$pinned" ]; then
    die "$base/SHA256SUMS has SHA-256 $(sha256 "$bin_dir/SHA256SUMS"), not the $pinned of release-sha256: not the release you pinned"
  fi
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
  # A release older than this script has no submit --save-result.
  if ! "$bin_dir/$exe" submit --help 2>&1 | grep -q -- '-save-result'; then
    die "$name has no submit --save-result: download-url names a release older than this script; use a newer one"
  fi
  say "installed $name (SHA-256 $got) as $bin_dir/$exe"
  if [ -n "${GITHUB_PATH:-}" ]; then
    printf '%s\n' "$bin_dir" >>"$GITHUB_PATH" # later steps of the job find evalmeter too
  fi
  printf '%s\n' "$bin_dir/$exe"
}

# output NAME VALUE: a step output on GitHub Actions, nothing elsewhere.
output() {
  if [ -n "${GITHUB_OUTPUT:-}" ]; then
    printf '%s=%s\n' "$1" "$2" >>"$GITHUB_OUTPUT"
  fi
}

# quote prints its argument as one word for eval.
quote() { printf "'%s' " "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }

# args prints, quoted for eval, submit's flags and files: the gates (one per line), the
# extra flags (split on blanks), "--" and the results files (one per line). No pathname
# expansion, and no carriage return of a file written on Windows.
args() {
  newline='
'
  old_ifs=$IFS
  set -f
  IFS=$newline
  for g in $(printf '%s' "${EVALMETER_CI_GATES:-}" | tr -d '\r'); do
    if [ -n "$g" ]; then quote --gate && quote "$g"; fi
  done
  IFS=" 	$newline"
  for a in ${EVALMETER_CI_ARGS:-}; do
    quote "$a"
  done
  quote --
  IFS=$newline
  for f in $(printf '%s' "$EVALMETER_CI_RESULTS" | tr -d '\r'); do
    if [ -n "$f" ]; then quote "$f"; fi
  done
  set +f
  IFS=$old_ifs
}

# enc percent-encodes a path segment or query value: a branch's slashes, a job's
# brackets (parallel:matrix) and the like.
enc() { printf '%s' "$1" | sed 's|%|%25|g; s|/|%2F|g; s|#|%23|g; s|?|%3F|g; s|&|%26|g; s| |%20|g; s|\[|%5B|g; s|\]|%5D|g; s|+|%2B|g'; }

# gitlab_baseline sets EVALMETER_CI_BASELINE to the baseline branch's last result of
# this job, from GitLab's job artifacts API; none yet is a warning, a refusal an error.
gitlab_baseline() {
  ref=$EVALMETER_CI_BASELINE_REF
  if [ "$ref" = "${CI_COMMIT_REF_NAME:-}" ]; then
    say "on $ref, the baseline branch: this result is the next baseline; nothing compared"
    return
  fi
  job=${CI_JOB_NAME:-evalmeter}
  url="$CI_API_V4_URL/projects/${CI_PROJECT_ID:-}/jobs/artifacts/$(enc "$ref")/raw/$result_file?job=$(enc "$job")"
  if [ -n "${EVALMETER_CI_GITLAB_TOKEN:-}" ]; then
    header="PRIVATE-TOKEN: $EVALMETER_CI_GITLAB_TOKEN"
  else
    header="JOB-TOKEN: ${CI_JOB_TOKEN:-}"
  fi
  file=$out_dir/evalmeter-baseline.json
  code=$(http_status "$url" "$file" "$header")
  case $code in
  200)
    EVALMETER_CI_BASELINE=$file
    say "baseline: the last $result_file of job $job on $ref"
    ;;
  404)
    rm -f "$file"
    warn "no $result_file of job $job in the last successful pipeline of $ref (none yet, its artifacts expired, or that pipeline did not run the job); nothing compared"
    ;;
  401 | 403)
    rm -f "$file"
    die "GitLab refused to read $ref's artifacts ($code): CI_JOB_TOKEN reads them on GitLab Premium and Ultimate only; elsewhere set EVALMETER_CI_GITLAB_TOKEN to a project access token with read_api (a masked variable)"
    ;;
  *)
    rm -f "$file"
    die "GitLab's job artifacts API answered $code for $ref's last $result_file"
    ;;
  esac
}

# --- Settings, checked before anything is installed or posted. ---------------------------

from=${EVALMETER_CI_FROM:-auto}
submit=${EVALMETER_CI_SUBMIT:-true}
result_file=${EVALMETER_CI_RESULT_FILE:-evalmeter-result.json}
out_dir=${EVALMETER_CI_OUT_DIR:-.}
max_drop=${EVALMETER_CI_MAX_DROP:-2}
fail_inconclusive=${EVALMETER_CI_FAIL_ON_INCONCLUSIVE:-false}
summary=${EVALMETER_CI_SUMMARY:-auto}
pinned=${EVALMETER_CI_RELEASE_SHA256:-}
[ -n "${EVALMETER_DOWNLOAD:-}" ] || die "set download-url (EVALMETER_DOWNLOAD) to where the evalmeter release is published"
if [ -z "$(printf '%s' "${EVALMETER_CI_RESULTS:-}" | tr -d ' \r\n')" ]; then
  die "no results files: give this run's results (results), one per line"
fi
case $submit in
true | dry-run) ;;
*) die "submit (EVALMETER_CI_SUBMIT) is \"$submit\": use true or dry-run" ;;
esac
if ! awk -v x="$max_drop" 'BEGIN { exit !(x ~ /^[0-9]+(\.[0-9]+)?$/ && x + 0 <= 100) }'; then
  die "max-drop (EVALMETER_CI_MAX_DROP) is \"$max_drop\": give points between 0 and 100, e.g. 2"
fi
case $fail_inconclusive in
true | false) ;;
*) die "fail-on-inconclusive (EVALMETER_CI_FAIL_ON_INCONCLUSIVE) is \"$fail_inconclusive\": use true or false" ;;
esac
case $summary in
auto | always | never) ;;
*) die "summary (EVALMETER_CI_SUMMARY) is \"$summary\": use auto, always or never" ;;
esac
if [ -n "$pinned" ] && ! printf '%s\n' "$pinned" | grep -Eq '^[0-9a-f]{64}$'; then
  die "release-sha256 (EVALMETER_CI_RELEASE_SHA256) is not a SHA-256 in lowercase hex: sha256sum SHA256SUMS prints it"
fi
if [ -n "${EVALMETER_CI_BASELINE:-}" ] && [ ! -f "$EVALMETER_CI_BASELINE" ]; then
  # The first run of a default branch has no baseline yet: not a failure.
  warn "no baseline at $EVALMETER_CI_BASELINE (the default branch's first result, or a wrong path?); nothing will be compared"
  EVALMETER_CI_BASELINE=
fi
mkdir -p "$out_dir" "$(dirname "$result_file")"

if [ -n "${EVALMETER_CI_URL:-}" ]; then export EVALMETER_URL="$EVALMETER_CI_URL"; fi
if [ -n "${EVALMETER_CI_API_KEY:-}" ]; then export EVALMETER_API_KEY="$EVALMETER_CI_API_KEY"; fi
unset EVALMETER_CI_API_KEY

evalmeter=$(install_evalmeter)
"$evalmeter" version >&2

if [ -z "${EVALMETER_CI_BASELINE:-}" ] && [ -n "${EVALMETER_CI_BASELINE_REF:-}" ] && [ -n "${CI_API_V4_URL:-}" ]; then
  gitlab_baseline
fi

# --- Submit (or check here), keeping the result file. ------------------------------------

status=0
eval "set -- $(args)"
if [ "$submit" = true ]; then
  "$evalmeter" submit --from "$from" --save-result "$result_file" "$@" || status=$?
else
  "$evalmeter" submit --dry-run --from "$from" --save-result "$result_file" "$@" || status=$?
fi
case $status in 0 | 3) ;; *) exit "$status" ;; esac
output result-file "$result_file"

# --- Compare with the baseline. ----------------------------------------------------------

if [ -n "${EVALMETER_CI_BASELINE:-}" ]; then
  set -- --max-drop "$max_drop"
  if [ "$fail_inconclusive" = true ]; then
    set -- "$@" --fail-on-inconclusive
  fi
  md=$out_dir/evalmeter-compare.md
  json=$out_dir/evalmeter-compare.json
  # Three outputs of the same comparison: its status is the same each time.
  cmp=0
  "$evalmeter" compare "$@" "$EVALMETER_CI_BASELINE" "$result_file" || cmp=$?
  case $cmp in 0 | 3 | 4) ;; *) exit "$cmp" ;; esac
  "$evalmeter" compare "$@" --output markdown "$EVALMETER_CI_BASELINE" "$result_file" >"$md" 2>/dev/null || true
  "$evalmeter" compare "$@" --output json "$EVALMETER_CI_BASELINE" "$result_file" >"$json" 2>/dev/null || true
  verdict=$(sed -n 's/^  "verdict": "\([a-z_]*\)",\{0,1\}$/\1/p' "$json")
  say "verdict: ${verdict:-unknown}; the comparison is in $md and $json"
  output verdict "$verdict"
  output markdown-file "$md"
  output json-file "$json"
  case $summary/${GITHUB_EVENT_NAME:-} in
  always/* | auto/pull_request | auto/pull_request_target)
    if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
      cat "$md" >>"$GITHUB_STEP_SUMMARY"
    fi
    ;;
  esac
  if [ "$cmp" -ne 0 ] && [ "$status" -ne 3 ]; then
    status=$cmp
  fi
fi
exit "$status"
