#!/usr/bin/env bash
# Builds the envtest control plane (kube-apiserver, etcd) from the Go module proxy
# into bin/k8s/<version>/, the directory KUBEBUILDER_ASSETS points at.
# Idempotent: a binary that is already there is not rebuilt.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-3.6.16}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${ROOT}/bin/k8s/${K8S_VERSION}"
WORK="${ROOT}/bin/.build"
mkdir -p "${OUT}" "${WORK}"

export GOFLAGS="${GOFLAGS:-} -mod=mod"
export GONOSUMDB="${GONOSUMDB:-github.com/tigera,github.com/projectcalico}"
export CGO_ENABLED=0

# The operator parses the apiserver's version: without these flags it reports
# v0.0.0-master and Calico's operator misreads the Kubernetes version.
minor="$(cut -d. -f2 <<<"${K8S_VERSION}")"
major="$(cut -d. -f1 <<<"${K8S_VERSION}")"
VERSION_LDFLAGS=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  VERSION_LDFLAGS+=" -X ${pkg}.gitVersion=v${K8S_VERSION} -X ${pkg}.gitMajor=${major} -X ${pkg}.gitMinor=${minor}"
  VERSION_LDFLAGS+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
done

build_kubernetes() { # build_kubernetes <cmd> ...
  local mod="${WORK}/kubernetes-${K8S_VERSION}"
  if [[ ! -f "${mod}/go.mod" ]]; then
    mkdir -p "${mod}"
    local upstream
    upstream="$(cd "${mod}" && go mod download -json "k8s.io/kubernetes@v${K8S_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
    {
      echo "module winready.local/kubernetes-build"
      echo
      echo "go 1.26"
      echo
      echo "require k8s.io/kubernetes v${K8S_VERSION}"
      echo
      # Every staging repository k8s.io/kubernetes replaces with a local path
      # is published as k8s.io/<name> v0.<minor>.<patch>.
      sed -n 's#^\s*\(k8s\.io/[a-z0-9-]*\) => \./staging/.*#replace \1 => \1 v0.'"${K8S_VERSION#*.}"'#p' "${upstream}"
    } >"${mod}/go.mod"
    printf 'package tools\n\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver"\n' >"${mod}/tools.go"
    (cd "${mod}" && go mod tidy)
  fi
  local cmd
  for cmd in "$@"; do
    if [[ -x "${OUT}/${cmd}" ]]; then continue; fi
    echo "building ${cmd} v${K8S_VERSION}" >&2
    (cd "${mod}" && go build -trimpath -ldflags "-s -w ${VERSION_LDFLAGS}" -o "${OUT}/${cmd}.tmp" "k8s.io/kubernetes/cmd/${cmd}")
    mv "${OUT}/${cmd}.tmp" "${OUT}/${cmd}"
  done
}

build_etcd() {
  [[ -x "${OUT}/etcd" ]] && return 0
  local mod="${WORK}/etcd-${ETCD_VERSION}"
  if [[ ! -f "${mod}/go.mod" ]]; then
    mkdir -p "${mod}"
    printf 'module winready.local/etcd-build\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 v%s\n' "${ETCD_VERSION}" >"${mod}/go.mod"
    printf 'package tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >"${mod}/tools.go"
    (cd "${mod}" && go mod tidy)
  fi
  echo "building etcd v${ETCD_VERSION}" >&2
  (cd "${mod}" && go build -trimpath -ldflags "-s -w" -o "${OUT}/etcd.tmp" go.etcd.io/etcd/server/v3)
  mv "${OUT}/etcd.tmp" "${OUT}/etcd"
}

build_etcd
build_kubernetes kube-apiserver "$@"
echo "${OUT}"
