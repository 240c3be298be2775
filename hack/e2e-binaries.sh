#!/usr/bin/env bash
# Builds the pinned binaries the end-to-end tests run, from the Go module proxy
# only, into bin/e2e/ (gitignored):
#
#   bin/e2e/kube-controller-manager, bin/e2e/kube-scheduler
#       symlinks to bin/k8s/<K8S_VERSION>/, built by hack/envtest-assets.sh
#   bin/e2e/kwok              sigs.k8s.io/kwok/cmd/kwok
#   bin/e2e/kwok-stages/      kwok's own default stages (kwok refuses to start without any)
#   bin/e2e/tigera-operator   github.com/tigera/operator/cmd
#
# Usage: hack/e2e-binaries.sh [k8s] [kwok] [operator]    (no argument: all three)
# Idempotent: whatever is already in place is not rebuilt, so a second run is a no-op.
# Scratch modules live in bin/.build/; neither the repository's go.mod nor its
# tree outside bin/ is touched.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-1.37.2}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
OPERATOR_VERSION="${OPERATOR_VERSION:-v1.43.0}"
# The api module version the operator's go.mod names is not served by the
# proxy; this is the closest one that is (it is patched below).
OPERATOR_API_VERSION="${OPERATOR_API_VERSION:-v0.0.0-20260615132847-f444e3b593ce}"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${ROOT}/bin/e2e"
WORK="${ROOT}/bin/.build"
mkdir -p "${OUT}" "${WORK}"

export GONOSUMDB="${GONOSUMDB:-github.com/tigera,github.com/projectcalico}"
export CGO_ENABLED=0
# Never download another Go toolchain: the proxy is for modules only.
export GOTOOLCHAIN=local

log() { echo "e2e-binaries: $*" >&2; }

# timed <label> <command...>: runs the command and prints its wall time.
timed() {
  local label="$1" start=${SECONDS}
  shift
  log "${label}: building"
  "$@"
  log "${label}: done in $((SECONDS - start))s"
}

# module_dir <module@version>: downloads a module (outside any main module, so
# no go.mod is involved) and prints its read-only directory in the module cache.
module_dir() {
  local tmp dir
  tmp="$(mktemp -d)"
  dir="$(cd "${tmp}" && go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  rmdir "${tmp}"
  [[ -n "${dir}" ]] || { log "cannot download $1"; return 1; }
  echo "${dir}"
}

# --- kube-controller-manager, kube-scheduler ---------------------------------
# hack/envtest-assets.sh already knows how to build any k8s.io/kubernetes
# command with the version ldflags the operator relies on; the binaries stay
# in bin/k8s/<version>/ next to kube-apiserver and are linked into bin/e2e/.
k8s() {
  local dir="${ROOT}/bin/k8s/${K8S_VERSION}" cmd
  if [[ ! -x "${dir}/kube-controller-manager" || ! -x "${dir}/kube-scheduler" ]]; then
    timed "kube-controller-manager+kube-scheduler v${K8S_VERSION}" \
      env K8S_VERSION="${K8S_VERSION}" bash "${ROOT}/hack/envtest-assets.sh" kube-controller-manager kube-scheduler >/dev/null
  fi
  for cmd in kube-controller-manager kube-scheduler; do
    [[ "$(readlink "${OUT}/${cmd}" || true)" == "../k8s/${K8S_VERSION}/${cmd}" ]] ||
      ln -sfn "../k8s/${K8S_VERSION}/${cmd}" "${OUT}/${cmd}"
  done
}

# --- kwok --------------------------------------------------------------------
kwok() {
  if [[ ! -x "${OUT}/kwok" ]]; then
    # go install writes the binary only once the build succeeded.
    timed "kwok ${KWOK_VERSION}" \
      env GOBIN="${OUT}" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"
  fi

  # kwok exits with "no stages found" unless stages are given (--config or the
  # Stage CRD). These are the ones its release manifests use: nodes become Ready
  # and keep their Lease renewed, and pods bound to fake nodes (DaemonSet pods
  # included) become Running/Ready, complete and get deleted.
  local stamp="${OUT}/kwok-stages/.${KWOK_VERSION}"
  if [[ ! -f "${stamp}" ]]; then
    local src
    src="$(module_dir "sigs.k8s.io/kwok@${KWOK_VERSION}")/kustomize/stage"
    rm -rf "${OUT}/kwok-stages"
    mkdir -p "${OUT}/kwok-stages"
    cp "${src}/node/fast/node-initialize.yaml" \
      "${src}/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
      "${src}/pod/fast/pod-ready.yaml" \
      "${src}/pod/fast/pod-complete.yaml" \
      "${src}/pod/fast/pod-delete.yaml" \
      "${OUT}/kwok-stages/"
    chmod u+w "${OUT}/kwok-stages/"*.yaml # the module cache is read-only
    touch "${stamp}"
  fi
}

# --- tigera-operator -----------------------------------------------------------
# v1.43.0 cannot be built with a plain "go install ...@v1.43.0":
#  * its go.mod replaces github.com/tigera/operator/api with ./api, and the
#    api version it names is not served by the proxy;
#  * it //go:embeds five Helm charts that its Makefile downloads and that are
#    not in the module zip.
# So it is built as a dependency of a scratch module whose replace directives
# point at writable copies of both modules, patched where needed.
operator_prepare() {
  local mod="$1" op api
  op="$(module_dir "github.com/tigera/operator@${OPERATOR_VERSION}")"
  api="$(module_dir "github.com/tigera/operator/api@${OPERATOR_API_VERSION}")"

  mkdir -p "${mod}/src"
  cp -r "${op}" "${mod}/src/operator"
  cp -r "${api}" "${mod}/src/api"
  chmod -R u+w "${mod}/src"

  # The embedded charts are only rendered for Gateway API and Istio, which the
  # tests do not enable: empty files satisfy //go:embed.
  touch "${mod}"/src/operator/pkg/render/gatewayapi/gateway-helm.tgz \
    "${mod}"/src/operator/pkg/render/istio/{base,istiod,cni,ztunnel}.tgz

  operator_patch_api "${mod}/src/api/v1"

  {
    echo "module winready.local/tigera-operator-build"
    echo
    echo "go 1.26"
    echo
    echo "require github.com/tigera/operator ${OPERATOR_VERSION}"
    echo
    echo "replace ("
    echo "	github.com/tigera/operator => ./src/operator"
    echo "	github.com/tigera/operator/api => ./src/api"
    # The operator's other replace directives (replaces only apply in the main module).
    sed -n '/^replace (/,/^)/{/=>/{/=> \.\//d;p}}' "${mod}/src/operator/go.mod"
    echo ")"
  } >"${mod}/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/tigera/operator/cmd"\n' >"${mod}/tools.go"
  # Some of its dependencies (openshift pseudo-versions) are not in the
  # checksum database: start from the operator's own, verified, go.sum.
  cp "${mod}/src/operator/go.sum" "${mod}/go.sum"
  (cd "${mod}" && go mod tidy)
}

# operator_patch_api <dir>: adds to the served api module what v1.43.0 uses and
# that version lacks, as upstream defines it (CNISpec.InstallMode and
# IstioSpec.WaypointLogging, with their deepcopy, and Istio.WaypointLoggingEnabled).
operator_patch_api() {
  local dir="$1"
  perl -0pi -e 's{(\tConfDir \*string `json:"confDir,omitempty"`\n)\}}{$1
	// InstallMode controls which CNI plugin binaries the operator installs onto each node
	// when CNI.Type is Calico. Default: All
	// +optional
	// +kubebuilder:validation:Enum=All;CalicoOnly
	InstallMode *CNIInstallMode `json:"installMode,omitempty"`
\}

// CNIInstallMode controls which CNI plugin binaries the operator installs onto the host.
type CNIInstallMode string

const (
	CNIInstallModeAll        CNIInstallMode = "All"
	CNIInstallModeCalicoOnly CNIInstallMode = "CalicoOnly"
)} or die "CNISpec not found\n"' "${dir}/installation_types.go"

  perl -0pi -e 's{(\tZTunnelDaemonset \*ZTunnelDaemonset `json:"ztunnel,omitempty"`\n)}{$1	// WaypointLogging controls whether L7 logging is enabled on every Gateway
	// using the istio-waypoint GatewayClass (Enabled, the default, or Disabled).
	// +optional
	WaypointLogging *LogCollectionStatusType `json:"waypointLogging,omitempty"`
} or die "IstioSpec not found\n"' "${dir}/istio_types.go"
  cat >>"${dir}/istio_types.go" <<'EOF'

// WaypointLoggingEnabled reports whether waypoint L7 logging should be rendered
// for this Istio CR. It defaults to true when the field is unset. A nil
// receiver reports false.
func (i *Istio) WaypointLoggingEnabled() bool {
	if i == nil {
		return false
	}
	wl := i.Spec.WaypointLogging
	return wl == nil || *wl != L7LogCollectionDisabled
}
EOF

  # Deepcopy: both new fields are pointers to strings.
  perl -0pi -e 's{(func \(in \*CNISpec\) DeepCopyInto\(out \*CNISpec\) \{\n.*?)(\n\}\n)}{$1
	if in.InstallMode != nil {
		in, out := &in.InstallMode, &out.InstallMode
		*out = new(CNIInstallMode)
		**out = **in
	}$2}s or die "CNISpec.DeepCopyInto not found\n"' "${dir}/zz_generated.deepcopy.go"
  perl -0pi -e 's{(func \(in \*IstioSpec\) DeepCopyInto\(out \*IstioSpec\) \{\n.*?)(\n\}\n)}{$1
	if in.WaypointLogging != nil {
		in, out := &in.WaypointLogging, &out.WaypointLogging
		*out = new(LogCollectionStatusType)
		**out = **in
	}$2}s or die "IstioSpec.DeepCopyInto not found\n"' "${dir}/zz_generated.deepcopy.go"
  gofmt -w "${dir}" # also fails on a syntax error
}

operator_build() {
  local mod="${WORK}/tigera-operator"
  # The stamp marks a complete preparation; anything else is started over.
  if [[ ! -f "${mod}/.prepared-${OPERATOR_VERSION}" ]]; then
    rm -rf "${mod}"
    mkdir -p "${mod}"
    operator_prepare "${mod}"
    touch "${mod}/.prepared-${OPERATOR_VERSION}"
  fi
  (cd "${mod}" && go build -trimpath \
    -ldflags "-s -w -X github.com/tigera/operator/version.VERSION=${OPERATOR_VERSION}" \
    -o "${OUT}/tigera-operator.tmp" github.com/tigera/operator/cmd)
  mv "${OUT}/tigera-operator.tmp" "${OUT}/tigera-operator"
}

operator() {
  [[ -x "${OUT}/tigera-operator" ]] && return 0
  timed "tigera-operator ${OPERATOR_VERSION}" operator_build
}

total_start=${SECONDS}
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(k8s kwok operator)
for t in "${targets[@]}"; do
  case "${t}" in
  k8s | kwok | operator) "${t}" ;;
  *)
    echo "usage: $0 [k8s] [kwok] [operator]" >&2
    exit 2
    ;;
  esac
done
log "all done in $((SECONDS - total_start))s"
# The paths, for scripts and humans.
for f in kube-controller-manager kube-scheduler kwok kwok-stages tigera-operator; do
  if [[ -e "${OUT}/${f}" ]]; then echo "${OUT}/${f}"; fi
done
