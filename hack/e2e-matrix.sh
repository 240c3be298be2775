#!/usr/bin/env bash
# Runs test/e2e against the real Tigera operator, once per version of
# E2E_OPERATORS (comma-separated, built by hack/e2e-binaries.sh into
# bin/e2e/<version>/): the specs labelled core (a refused shape, the Windows
# join gate, the migration with one calico-node replacement per node, the
# rollback to exactly what was there) against each version, the whole suite
# (GINKGO_FLAGS) against the newest. One control plane per version, one after
# the other. An operator older than the oldest tested one runs only the spec
# of its refusal in the preflight (label untested-calico). Prints, per version, the specs run and passed and the calico-node
# pods replaced per node; exits non-zero if any version failed.
#
# Usage: E2E_OPERATORS=v1.35.0,v1.43.0 hack/e2e-matrix.sh   (make e2e runs it)
# The environment make e2e sets (KUBEBUILDER_ASSETS, E2E_MANIFEST,
# E2E_TIMING_NODES, E2E_LOG_DIR) is passed through; with E2E_LOG_DIR each
# version logs into its own <E2E_LOG_DIR>/<version>/.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
E2E_OPERATORS="${E2E_OPERATORS:-v1.43.0}"
GINKGO_FLAGS="${GINKGO_FLAGS:-}"
OUT="${E2E_MATRIX_OUT:-${ROOT}/bin/e2e-matrix}"
mkdir -p "${OUT}"

mapfile -t versions < <(tr ',' '\n' <<<"${E2E_OPERATORS}" | sed '/^$/d' | sort -uV)
newest="${versions[-1]}"
# The oldest operator whose Calico winready is tested with (v3.28.1,
# preflight.OldestTestedCalico): an older one runs only the spec of its
# refusal in the preflight.
OLDEST_TESTED="${E2E_OLDEST_TESTED:-v1.35.0}"
older_than_tested() { [[ "$1" != "${OLDEST_TESTED}" && "$(printf '%s\n%s\n' "$1" "${OLDEST_TESTED}" | sort -V | head -1)" == "$1" ]]; }

declare -A result summary
failed=0
for version in "${versions[@]}"; do
  if older_than_tested "${version}"; then
    flags=(-ginkgo.label-filter=untested-calico)
    what="refusal of an untested Calico"
  elif [[ "${version}" == "${newest}" ]]; then
    # shellcheck disable=SC2206 # GINKGO_FLAGS is a list of flags
    flags=(${GINKGO_FLAGS})
    what="whole suite"
  else
    flags=(-ginkgo.label-filter=core)
    what="core"
  fi
  log="${OUT}/${version}.log"
  logdir=""
  if [[ -n "${E2E_LOG_DIR:-}" ]]; then
    logdir="${E2E_LOG_DIR}/${version}"
    mkdir -p "${logdir}"
  fi
  echo "e2e-matrix: Tigera operator ${version}: ${what} (log: ${log})" >&2
  start=${SECONDS}
  (cd "${ROOT}" && E2E_BACKEND=real E2E_OPERATOR_VERSION="${version}" E2E_LOG_DIR="${logdir}" \
    go test ./test/e2e/ -count=1 -timeout 40m -v -ginkgo.v -ginkgo.no-color "${flags[@]}") >"${log}" 2>&1
  rc=$?
  elapsed=$((SECONDS - start))
  ran="$(grep -Eo 'Ran [0-9]+ of [0-9]+ Specs' "${log}" | tail -1)"
  counts="$(grep -Eo '(Passed|Failed|Pending|Skipped): [0-9]+|[0-9]+ (Passed|Failed|Pending|Skipped)' "${log}" | tr '\n' ' ')"
  if [[ ${rc} -eq 0 ]]; then result[${version}]=PASS; else result[${version}]=FAIL failed=1; fi
  summary[${version}]="$(printf '%s, %s in %ss (%s%s)\n' "${result[${version}]}" "${what}" "${elapsed}" "${ran:-no specs ran}" "${counts:+; ${counts% }}")
$(grep -Eo '(migration|rollback): (calico-node pods replaced per node|Ready after|RolledBack after) .*' "${log}" | sed 's/^/    /')
$(grep -E '^\s*\[FAIL\]' "${log}" | sed 's/^\s*/    /' | sort -u)"
  echo "e2e-matrix: Tigera operator ${version}: ${summary[${version}]}" >&2
done

echo
echo "e2e-matrix: summary (logs in ${OUT}/)"
for version in "${versions[@]}"; do
  echo "  ${version}: ${summary[${version}]}"
done
exit "${failed}"
