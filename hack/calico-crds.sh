#!/usr/bin/env bash
# Copies the CRDs that Calico v3.32 installs out of the pinned Tigera operator
# module into bin/crds/ (gitignored): the projectcalico.org/v3 CRDs a migration
# needs, the operator.tigera.io CRDs of Calico (not Calico Enterprise), and the
# crd.projectcalico.org/v1 IPAMBlock CRD that holds IPAM blocks where the Calico
# API server serves projectcalico.org/v3 (it does not serve ipamblocks).
set -euo pipefail

OPERATOR_VERSION="${OPERATOR_VERSION:-v1.43.0}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${ROOT}/bin/crds"
STAMP="${OUT}/.operator-${OPERATOR_VERSION}-2"
[[ -f "${STAMP}" ]] && exit 0

export GONOSUMDB="${GONOSUMDB:-github.com/tigera,github.com/projectcalico}"
# Outside the project module, so that go.mod and go.sum stay untouched.
dir="$(cd "$(mktemp -d)" && GOFLAGS=-mod=mod go mod download -json "github.com/tigera/operator@${OPERATOR_VERSION}" |
  sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
src="${dir}/pkg/imports/crds"

rm -rf "${OUT}"
mkdir -p "${OUT}/calico" "${OUT}/operator" "${OUT}/calico-v1"
cp "${src}"/calico/v3.projectcalico.org/*.yaml "${OUT}/calico/"
cp "${src}/calico/v1.crd.projectcalico.org/crd.projectcalico.org_ipamblocks.yaml" "${OUT}/calico-v1/"
# The operator's own list of the operator.tigera.io CRDs that belong to Calico.
for name in installations apiservers gatewayapis imagesets tigerastatuses whiskers goldmanes managementclusterconnections istios; do
  cp "${src}/operator/operator.tigera.io_${name}.yaml" "${OUT}/operator/"
done
chmod -R u+w "${OUT}"
touch "${STAMP}"
