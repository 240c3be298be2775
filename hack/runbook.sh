#!/usr/bin/env bash
# The manual runbook that winready replaces, scripted with kubectl in the
# order it gives: each change, then the wait a careful person would do, as
# sharp as kubectl allows: every wait is a watch (kubectl wait, kubectl
# rollout status) on what Calico reports (the IPPool, TigeraStatus calico at
# the Installation's generation, calico-node's template and rollout), never a
# fixed sleep. serviceCIDRs and the Windows dataplane go in one patch, as
# Calico's own instructions write them. Used by the benchmark (test/bench) and
# the timing scenario of make e2e as the reference to beat.
# Needs KUBECONFIG and KUBECTL, and the API server address and service
# network as arguments. RUNBOOK_TRACE=1 prints each command with its time.
set -euo pipefail
host="$1" port="$2" cidrs="$3"
if [[ -n "${RUNBOOK_TRACE:-}" ]]; then
  PS4='+ ${EPOCHREALTIME} '
  set -x
fi
k() { "${KUBECTL}" --kubeconfig "${KUBECONFIG}" "$@"; }
wait_calico() { # the Installation generation that TigeraStatus calico must reach
  local gen
  gen="$(k get installation default -o jsonpath='{.metadata.generation}')"
  k wait tigerastatus/calico --timeout=30m \
    --for=jsonpath='{.status.conditions[?(@.type=="Available")].observedGeneration}'="${gen}"
  k wait tigerastatus/calico --timeout=30m --for=condition=Available
}
node_env() { # wait until calico-node carries env $1=$2, then for its rollout
  k -n calico-system wait ds/calico-node --timeout=30m \
    --for=jsonpath="{.spec.template.spec.containers[0].env[?(@.name==\"$1\")].value}=$2"
  k -n calico-system rollout status ds/calico-node --timeout=30m
}

# 1. IPAM strictAffinity
k patch ipamconfigurations.projectcalico.org default --type merge -p '{"spec":{"strictAffinity":true}}'
# 2. VXLANCrossSubnet -> VXLAN on the Installation's pool
k patch installation default --type json -p '[{"op":"replace","path":"/spec/calicoNetwork/ipPools/0/encapsulation","value":"VXLAN"}]'
k wait ippools.projectcalico.org/default-ipv4-ippool --timeout=30m --for=jsonpath='{.spec.vxlanMode}'=Always
wait_calico
# 3. BGP off, and the calico-node rollout
k patch installation default --type merge -p '{"spec":{"calicoNetwork":{"bgp":"Disabled"}}}'
node_env CALICO_NETWORKING_BACKEND vxlan
# 4. The services endpoint, and the calico-node rollout
k -n tigera-operator create configmap kubernetes-services-endpoint \
  --from-literal=KUBERNETES_SERVICE_HOST="${host}" --from-literal=KUBERNETES_SERVICE_PORT="${port}"
node_env KUBERNETES_SERVICE_HOST "${host}"
# 5 and 6. serviceCIDRs and the Windows dataplane, which validation wants together
k patch installation default --type merge \
  -p "{\"spec\":{\"serviceCIDRs\":[\"${cidrs}\"],\"calicoNetwork\":{\"windowsDataplane\":\"HNS\"}}}"
k -n calico-system wait ds/calico-node-windows --for=create --timeout=30m
wait_calico
