#!/usr/bin/env bash
# e2e-kind.sh: the real kind + Docker path of kubectl-bundle-slot, for a
# machine that has a Docker engine (not part of make test, which runs on
# machines without one). It builds slot a with the kind library, runs zarf
# init with the real init package, checks names and ports, and destroys it.
#
#   E2E_ARCHIVES=/path/with/zarf-init-<arch>-v0.84.0.tar.zst make e2e-kind
#
# Uses its own state dir, cluster prefix and port base, so it never touches
# the operator's slots.
set -o errexit -o nounset -o pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin="$root/bin"
: "${E2E_ARCHIVES:?set E2E_ARCHIVES to a directory holding the zarf init package (zarf-init-*-v*.tar.zst)}"

if ! docker info >/dev/null 2>&1; then
  echo "e2e-kind: Docker is not reachable; this target needs a Docker engine" >&2
  exit 3
fi
if ! command -v zarf >/dev/null; then
  PATH="$root/bin/testbin:$PATH"
fi

work=$(mktemp -d)
export KUBECTL_BUNDLE_STATE_DIR="$work/state"
export KUBECONFIG="$work/kubeconfig"
export KUBECTL_BUNDLE_CLUSTER_PREFIX=kb-e2e
export KUBECTL_BUNDLE_REGISTRY_NAME=kb-e2e-registry
export KUBECTL_BUNDLE_REGISTRY_PORT_BASE=${E2E_PORT_BASE:-5902}
export KUBECTL_BUNDLE_ARCHIVES="$E2E_ARCHIVES"

cleanup() {
  "$bin/kubectl-bundle-slot" destroy a --force || true
  rm -rf "$work"
}
trap cleanup EXIT

"$bin/kubectl-bundle-slot" preflight a
"$bin/kubectl-bundle-slot" create a
kubectl --context kind-kb-e2e-a wait --for=condition=Ready node --all --timeout=180s
docker ps --filter name=^kb-e2e-registry-a$ --format '{{.Ports}}' | grep -q "127.0.0.1:${KUBECTL_BUNDLE_REGISTRY_PORT_BASE}->5000/tcp"
curl --fail --silent "http://127.0.0.1:${KUBECTL_BUNDLE_REGISTRY_PORT_BASE}/v2/" >/dev/null
# Same inputs again: a no-op.
"$bin/kubectl-bundle-slot" create a | grep -q 'nothing to do'
"$bin/kubectl-bundle-slot" describe a
"$bin/kubectl-bundle-slot" destroy a
if docker ps -a --format '{{.Names}}' | grep -q '^kb-e2e-'; then
  echo "e2e-kind: containers left after destroy" >&2
  exit 1
fi
echo "e2e-kind: PASS"
