#!/usr/bin/env bash
# Runs the e2e rollout-count scenario (migration to Ready and rollback, each
# counting calico-node pod replacements per node) N times against the real
# Tigera operator, each on a fresh control plane, and prints, per run, the
# replacements the scenario counted and its times, then the distribution.
#
# Usage: hack/e2e-repeat.sh [N] [ginkgo focus]   (N defaults to 10)
# Needs make e2e-binaries build done; E2E_REPEAT_DIR keeps the runs' output
# and the processes' logs (default: a temporary directory).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
runs="${1:-10}"
# The main scenario's specs from the join gate (which creates the paused
# WindowsReadiness) to the rollback; nothing of the upgrade scenario.
focus="${2:-keeps Windows nodes out|migrates to Ready replacing|rolls back to exactly what was there, replacing}"
dir="${E2E_REPEAT_DIR:-$(mktemp -d)}"
mkdir -p "${dir}"

(cd "${ROOT}" && go test -c -o "${dir}/e2e.test" ./test/e2e/)
for i in $(seq 1 "${runs}"); do
  mkdir -p "${dir}/run-${i}"
  start=${SECONDS}
  rc=0
  (cd "${ROOT}/test/e2e" && E2E_BACKEND=real E2E_LOG_DIR="${dir}/run-${i}" KUBEBUILDER_ASSETS="${ROOT}/bin/k8s/1.37.2" \
    WINREADY_BIN="${WINREADY_BIN:-${ROOT}/bin/winready}" "${dir}/e2e.test" -test.v -test.timeout 30m -ginkgo.v \
    -ginkgo.no-color -ginkgo.focus "${focus}") >"${dir}/run-${i}.out" 2>&1 || rc=$?
  echo "run ${i}: exit ${rc} after $((SECONDS - start))s"
  grep -E '^\s*(migration|rollback): ' "${dir}/run-${i}.out" | sed 's/^ */  /' || true
done | tee "${dir}/summary.txt"

echo "distribution over ${runs} runs:"
grep -oE '(migration|rollback): calico-node pods replaced per node map\[[^]]*\]' "${dir}/summary.txt" |
  sed -E 's/[a-z]+-[0-9]+://g; s/per node map/per node /' | sort | uniq -c
grep -cE '^run [0-9]+: exit 0 ' "${dir}/summary.txt" | sed "s/\$/ of ${runs} runs passed/"
echo "output and logs: ${dir}"
