#!/usr/bin/env bash
# test-binaries.sh [-C DIR] PKG...: runs the tests of each package as
# `go test -count=1` does, from a test binary kept in bin/tests/. go test links
# every package's test binary again on every run (about 100 MB for a package
# that starts a control plane, 4 to 7 s of CPU each); `go test -c -o` keeps the
# binary and links it again only when its inputs changed.
#
# -C DIR runs the packages of the module in DIR (a module of its own, such as
# test/chart), keeping its binaries in bin/tests/DIR/. Packages without tests
# are left out, as go test leaves them.
#
# Runs TEST_P packages at a time (2 unless set), each in its package's
# directory as go test runs it, with the flags of TEST_FLAGS (e.g.
# -test.timeout=30m -ginkgo.focus=...) after -test.count=1. Prints go test's
# line for each package, the output of a package that fails, and fails if any
# package failed or none had tests.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=$root/bin/tests
if [[ ${1:-} == -C ]]; then
  cd "$2"
  out=$out/$2
  shift 2
fi

mkdir -p "$out"
# "IMPORTPATH DIR" of each package with tests.
listed=$(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' "$@")
listed=$(grep . <<<"$listed" || true) # go list prints an empty line for a package without tests
if [[ -z $listed ]]; then
  echo "test-binaries.sh: no package with tests in $*" >&2
  exit 1
fi
# shellcheck disable=SC2046 # one import path per word.
go test -c -o "$out/" $(cut -d' ' -f1 <<<"$listed")

# run IMPORTPATH DIR: runs one package's binary, as go test prints it. go test
# -c names it after the import path's last element.
run() {
  local pkg=$1 dir=$2 log began status
  local bin=$out/${pkg##*/}.test
  if [[ ! -x $bin ]]; then
    echo "FAIL	$pkg [no test binary]"
    return 1
  fi
  log=$(mktemp)
  began=$(date +%s.%N)
  status=0
  # shellcheck disable=SC2086 # TEST_FLAGS is a list of flags.
  (cd "$dir" && "$bin" -test.paniconexit0 -test.count=1 ${TEST_FLAGS:-}) >"$log" 2>&1 || status=$?
  local took
  took=$(awk -v a="$began" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
  if (( status == 0 )); then
    echo "ok  	$pkg	${took}s"
  else
    cat "$log"
    echo "FAIL	$pkg	${took}s"
  fi
  rm -f "$log"
  return "$status"
}
export -f run
export out

xargs -P "${TEST_P:-2}" -L 1 bash -c 'run "$@"' run <<<"$listed"
