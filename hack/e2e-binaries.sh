#!/usr/bin/env bash
# Builds the pinned binaries the end-to-end tests run, from the Go module proxy
# only, into bin/e2e/ (gitignored):
#
#   bin/e2e/kube-controller-manager, bin/e2e/kube-scheduler
#       symlinks to bin/k8s/<K8S_VERSION>/, built by hack/envtest-assets.sh
#   bin/e2e/kwok              sigs.k8s.io/kwok/cmd/kwok
#   bin/e2e/kwok-stages/      kwok's own default stages (kwok refuses to start without any)
#   bin/e2e/<version>/tigera-operator
#                             github.com/tigera/operator at OPERATOR_VERSION
#                             (v1.43.0 unless set; a comma-separated list builds each)
#
# Usage: hack/e2e-binaries.sh [k8s] [kwok] [operator]    (no argument: all three)
#        OPERATOR_VERSION=v1.35.0 hack/e2e-binaries.sh operator
# Idempotent: whatever is already in place is not rebuilt, so a second run is a no-op.
# Scratch modules and writable module copies live in bin/.build/; neither the repository's go.mod nor its
# tree outside bin/ is touched.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-1.37.2}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
# One version or a comma-separated list; each goes to bin/e2e/<version>/.
OPERATOR_VERSION="${OPERATOR_VERSION:-v1.43.0}"

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
# Any operator version the proxy serves, each into bin/e2e/<version>/, built in
# a writable copy of its module zip (bin/.build/tigera-operator-<version>/) as
# the main module, with its own go.mod and go.sum:
#  * v1.39.0 and later replace github.com/tigera/operator/api with ./api, a
#    nested module that the zip does not hold, and name api versions the proxy
#    does not serve: a served api version close to the named one is copied to
#    ./api and patched with what that operator uses and it lacks
#    (operator_patch_api_<version>), and the operator's own source follows
#    what that api renamed (operator_patch_src);
#  * v1.41.1 and later //go:embed Helm charts (Istio's, and Gateway API's from
#    v1.43.0) that their Makefile downloads: they are read only for Istio and
#    Gateway API, which the tests do not enable, so empty files satisfy the
#    build;
#  * v1.35.0 and older fail as a dependency of another module ("go get
#    github.com/tigera/operator@v1.35.0"): their openshift/library-go, of a
#    go.mod older than go 1.17, pulls vbom.ml/util into the module graph, and
#    the proxy does not serve it. Built as the main module, whose go.mod lists
#    every module it needs (module graph pruning, go 1.17 and later), go
#    never loads vbom.ml/util: no replace is needed.
# Versions served (exact versions; lists are refused), with their Calico:
#  v1.29.0 (v3.25.0), v1.30.0 (v3.26.0), v1.33.0 (v3.27.0), v1.35.0 (v3.28.1),
#  v1.39.0 (v3.30.2), v1.40.0 (v3.31.0), v1.41.1 (v3.31.3), v1.42.3 (v3.32.1),
#  v1.43.0 (v3.32.0). All nine build this way; what each needed and how long
#  it took is in docs/development.md ("Tigera operator versions").

# operator_api_version <operator version>: the served api module version the
# build copies to ./api (OPERATOR_API_VERSION overrides it). Served: the two
# below. Refused: the ones the operators name, v0.0.0-20250718195010-e4328952af47
# (v1.40.0), v0.0.0-20260120220012-4a3f8a7d8399 (v1.41.1, v1.42.3),
# v0.0.0-20260428181734-7c8905ccde10 (v1.43.0), and
# v0.0.0-20251112210545-bc4ab6d9c660.
operator_api_version() {
  if [[ -n "${OPERATOR_API_VERSION:-}" ]]; then
    echo "${OPERATOR_API_VERSION}"
    return
  fi
  case "$1" in
  v1.39.*) echo v0.0.0-20250807130954-d4353da6554e ;;
  *) echo v0.0.0-20260615132847-f444e3b593ce ;;
  esac
}

operator_prepare() {
  local version="$1" src="$2" op
  op="$(module_dir "github.com/tigera/operator@${version}")"
  cp -r "${op}" "${src}"
  chmod -R u+w "${src}" # the module cache is read-only

  # Embedded Helm charts missing from the zip: empty files.
  local gofile chart
  while IFS= read -r gofile; do
    for chart in $(sed -n 's|^[[:space:]]*//go:embed \(.*\.tgz\)$|\1|p' "${gofile}"); do
      chart="$(dirname "${gofile}")/${chart}"
      [[ -e "${chart}" ]] && continue
      touch "${chart}"
      log "tigera-operator ${version}: empty ${chart#"${src}"/}"
    done
  done < <(grep -rl --include='*.go' '//go:embed .*\.tgz' "${src}/pkg" || true)

  if grep -Eq 'github.com/tigera/operator/api => \./api' "${src}/go.mod"; then
    local api_version api patch
    api_version="$(operator_api_version "${version}")"
    api="$(module_dir "github.com/tigera/operator/api@${api_version}")"
    rm -rf "${src}/api"
    cp -r "${api}" "${src}/api"
    chmod -R u+w "${src}/api"
    log "tigera-operator ${version}: ./api is github.com/tigera/operator/api@${api_version}"
    patch="operator_patch_api_${version//./_}"
    if declare -F "${patch}" >/dev/null; then
      "${patch}" "${src}/api/v1"
      gofmt -w "${src}/api/v1" # also fails on a syntax error
    fi
    operator_patch_src "${version}" "${src}"
  fi
}

# operator_patch_src <version> <dir>: follows, in the operator's own source,
# what the served api renamed since the version that operator names.
operator_patch_src() {
  local version="$1" src="$2"
  case "${version}" in
  v1.40.* | v1.41.* | v1.42.*)
    # MonitorSpec.AlertManager.AlertManagerSpec became Alertmanager.AlertmanagerSpec.
    perl -pi -e 's/Monitor\.AlertManager\.AlertManagerSpec/Monitor.Alertmanager.AlertmanagerSpec/g; s/Monitor\.AlertManager\b/Monitor.Alertmanager/g' \
      "${src}/pkg/render/monitor/monitor.go"
    ;;
  esac
  case "${version}" in
  v1.41.*)
    # github.com/tigera/api v0.0.0-20260115201458-bce624761bbd, which v1.41.1
    # requires, is not served: the served one the api module requires.
    (cd "${src}" && go mod edit -replace=github.com/tigera/api=github.com/tigera/api@v0.0.0-20260417005328-22f813a9c2dc)
    ;;
  esac
  case "${version}" in
  v1.40.* | v1.41.*)
    # The later api's own requirements (prometheus-operator v0.90, Envoy
    # Gateway v1.7, Kubernetes 0.35) would move these operators off the
    # versions their source is written for: the api is built against the
    # operator's, but for github.com/tigera/api, whose numorstring.DSCP it uses.
    local tigera_api
    tigera_api="$(grep -Eo 'github.com/tigera/api v[^ ]+' "${src}/api/go.mod")"
    perl -0pi -e 's/\nrequire \(.*?\n\)\n//gs; s/\nrequire [^(\n][^\n]*\n//g' "${src}/api/go.mod"
    printf '\nrequire %s\n' "${tigera_api}" >>"${src}/api/go.mod"
    ;;
  esac
}

# operator_patch_api_v1_43_0 <dir>: adds to the served api module what v1.43.0
# uses and that version lacks, as upstream defines it (CNISpec.InstallMode and
# IstioSpec.WaypointLogging, with their deepcopy, and Istio.WaypointLoggingEnabled).
operator_patch_api_v1_43_0() {
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
}

operator_build() {
  local version="$1" src="${WORK}/tigera-operator-$1" out="${OUT}/$1" main=.
  # The stamp marks a complete preparation; anything else is started over.
  if [[ ! -f "${src}/.prepared" ]]; then
    rm -rf "${src}"
    operator_prepare "${version}" "${src}"
    touch "${src}/.prepared"
  fi
  # The main package: cmd/ from v1.39.0 on, the module's root before.
  [[ -f "${src}/cmd/main.go" ]] && main=./cmd
  mkdir -p "${out}"
  # -mod=mod: ./api's own requirements may add to the operator's go.mod and go.sum.
  (cd "${src}" && go build -mod=mod -trimpath \
    -ldflags "-s -w -X github.com/tigera/operator/version.VERSION=${version}" \
    -o "${out}/tigera-operator.tmp" "${main}")
  mv "${out}/tigera-operator.tmp" "${out}/tigera-operator"
}

# operator builds each version of OPERATOR_VERSION (a comma-separated list)
# that is not in place yet.
operator() {
  local version
  for version in ${OPERATOR_VERSION//,/ }; do
    [[ -x "${OUT}/${version}/tigera-operator" ]] && continue
    timed "tigera-operator ${version}" operator_build "${version}"
  done
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
for f in kube-controller-manager kube-scheduler kwok kwok-stages; do
  if [[ -e "${OUT}/${f}" ]]; then echo "${OUT}/${f}"; fi
done
for version in ${OPERATOR_VERSION//,/ }; do
  if [[ -e "${OUT}/${version}/tigera-operator" ]]; then echo "${OUT}/${version}/tigera-operator"; fi
done
