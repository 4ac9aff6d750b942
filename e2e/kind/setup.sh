#!/usr/bin/env bash
# Prepare a kind cluster so that `OPTSCHED_E2E_EXTERNAL=1 pytest e2e` runs the same suite
# as the local harness:
#   * Kubernetes, Kueue and KWOK at the versions pinned in e2e/versions.env;
#   * Kueue from its release manifest; KWOK from its release manifest plus our Stages;
#   * the fake GPU nodes of an e2e profile (same names, labels, annotations, capacity);
#   * the real kind worker labelled like a CPU-only node of the same topology.
# Needs: docker, kind, kubectl, python with this repo's e2e deps (PyYAML, httpx).
#
#   e2e/kind/setup.sh            # create + prepare (profile: $OPTSCHED_E2E_PROFILE or small)
#   e2e/kind/setup.sh delete     # remove the cluster
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=../versions.env
source e2e/versions.env

CLUSTER="${KIND_CLUSTER_NAME:-optsched-e2e}"
PROFILE="${OPTSCHED_E2E_PROFILE:-small}"
KUBECONFIG_OUT="${KIND_KUBECONFIG:-${OPTSCHED_E2E_STATE:-/tmp/optsched-e2e}-kind.kubeconfig}"
NODE_IMAGE="${KIND_NODE_IMAGE:-kindest/node:${KUBERNETES_VERSION}}"

if [[ "${1:-}" == "delete" ]]; then
  kind delete cluster --name "$CLUSTER"
  exit 0
fi

for tool in docker kind kubectl; do
  command -v "$tool" >/dev/null || { echo "setup.sh: $tool not found on PATH" >&2; exit 2; }
done

kind create cluster --name "$CLUSTER" --config e2e/kind/cluster.yaml \
  --image "$NODE_IMAGE" --kubeconfig "$KUBECONFIG_OUT" --wait 180s
export KUBECONFIG="$KUBECONFIG_OUT"

echo "== Kueue ${KUEUE_VERSION}"
kubectl apply --server-side -f \
  "https://github.com/kubernetes-sigs/kueue/releases/download/${KUEUE_VERSION}/manifests.yaml"
kubectl -n kueue-system rollout status deployment/kueue-controller-manager --timeout=300s
# The webhook is served once the manager's cert rotator has injected its CA bundle.
until kubectl apply --dry-run=server -f - >/dev/null 2>&1 <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: e2e-webhook-probe}
YAML
do sleep 2; done

echo "== KWOK ${KWOK_VERSION}"
kubectl apply -f "https://github.com/kubernetes-sigs/kwok/releases/download/${KWOK_VERSION}/kwok.yaml"
kubectl apply -f e2e/stages/stages.yaml
kubectl -n kube-system rollout status deployment/kwok-controller --timeout=300s

echo "== fake GPU nodes (profile ${PROFILE})"
python -m e2e.nodes --profile "$PROFILE" --kubeconfig "$KUBECONFIG"
kubectl wait --for=condition=Ready node -l type=kwok --timeout=300s

# The real worker joins the topology as a CPU-only node, so TAS sees every node labelled.
for node in $(kubectl get nodes -l '!type,!node-role.kubernetes.io/control-plane' -o name); do
  kubectl label --overwrite "$node" \
    cloud.provider.com/topology-block=block-kind cloud.provider.com/topology-rack=rack-kind
done

cat <<MSG
kind cluster "$CLUSTER" ready. Run the suite with:
  KUBECONFIG=$KUBECONFIG_OUT OPTSCHED_E2E_EXTERNAL=1 python -m pytest e2e
MSG
