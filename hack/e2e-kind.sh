#!/usr/bin/env bash
# e2e-kind.sh: kubectl-bundle-slot on real parts: a real Docker engine, real
# kind clusters from the node image built here (hack/images/build.sh), the
# slot's registry container (distribution v3) on its published port, the
# real zarf deploying a signed package whose Deployment becomes Available
# from pods running the image that registry serves.
#
#   make e2e-kind     (= hack/docker/ensure.sh run hack/e2e-kind.sh)
#
# Uses its own state dir, kubeconfig, cluster prefix (kb-e2e), registry name
# and port base, so it never touches the operator's slots; everything it
# creates it removes. Measurements go to $E2E_MEASURE (default
# bin/e2e-kind-measurements.txt).
set -o errexit -o nounset -o pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin="$root/bin"
PATH="$bin:$bin/testbin:$PATH"
measure=${E2E_MEASURE:-$bin/e2e-kind-measurements.txt}
: >"$measure"

docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || {
  echo "e2e-kind: Docker is not reachable (run it through hack/docker/ensure.sh run)" >&2
  exit 3
}
command -v zarf >/dev/null || {
  echo "e2e-kind: zarf is missing (make testbin)" >&2
  exit 3
}

now() { date +%s%N; }
# m NAME START: records the seconds since START.
m() {
  local ms=$((($(now) - $2) / 1000000))
  printf '%-28s %4d.%01d s\n' "$1" $((ms / 1000)) $((ms % 1000 / 100)) | tee -a "$measure"
}
fail() {
  echo "e2e-kind: FAIL: $*" >&2
  exit 1
}

t=$(now)
images_env=$("$root/hack/images/build.sh")
# shellcheck disable=SC1090
. "$images_env"
m images "$t"

work=$(mktemp -d)
port=${E2E_PORT_BASE:-5902}
export KUBECTL_BUNDLE_STATE_DIR="$work/state"
export KUBECONFIG="$work/kubeconfig"
export KUBECTL_BUNDLE_CLUSTER_PREFIX=kb-e2e
export KUBECTL_BUNDLE_REGISTRY_NAME=kb-e2e-registry
export KUBECTL_BUNDLE_REGISTRY_PORT_BASE=$port
export KUBECTL_BUNDLE_ARCHIVES="$work/archives"
export KUBECTL_BUNDLE_NODE_IMAGE="$KB_NODE_IMAGE@$KB_NODE_IMAGE_ID"
export KUBECTL_BUNDLE_REGISTRY_IMAGE="$KB_REGISTRY_IMAGE@$KB_REGISTRY_IMAGE_ID"
export KUBECTL_BUNDLE_ZARF_REGISTRY=slot
export ZARF_LOG_FORMAT=console
# The node mounts the engine's socket (CAPD drives Docker through it).
case ${DOCKER_HOST:-} in
unix://*) export KUBECTL_BUNDLE_DOCKER_SOCKET=${DOCKER_HOST#unix://} ;;
esac

cleanup() {
  rc=$?
  if [ "$rc" != 0 ] && [ -f "$work/state/slots/a.json" ]; then
    kubectl --context kind-kb-e2e-a get pods -A -o wide 2>&1 | tail -20 || true
  fi
  kubectl-bundle-slot destroy a --force >/dev/null 2>&1 || true
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT

# The archives a site receives: the node and registry images, and an init
# package for an external registry (the slot's): zarf's own init package
# cannot be built here (its injector is Rust; its registry and agent images
# come from a container registry).
mkdir -p "$work/archives" "$work/init" "$work/pkg"
ln -s "$KB_BENCH_IMAGES/node.tar" "$work/archives/node.tar"
ln -s "$KB_BENCH_IMAGES/registry.tar" "$work/archives/registry.tar"
cat >"$work/init/zarf.yaml" <<'EOF'
kind: ZarfInitConfig
metadata:
  name: init
  description: the bench's init package for an external registry (the slot's)
components:
  - name: bench-marker
    required: true
    manifests:
      - name: marker
        files: [marker.yaml]
EOF
cat >"$work/init/marker.yaml" <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: kb-bench-init
  namespace: zarf
data:
  registry: external (the slot's registry)
EOF
(cd "$work/init" && zarf package create . --confirm --skip-sbom -o "$work/archives" --no-color >"$work/init.log" 2>&1) ||
  fail "zarf package create (init): $(tail -5 "$work/init.log")"

# The workload package: a Deployment and a Service of the workload image,
# pulled by the node from the slot's registry (###ZARF_REGISTRY###).
cat >"$work/pkg/zarf.yaml" <<EOF
kind: ZarfPackageConfig
metadata:
  name: bench-workload
  version: 1.0.0
components:
  - name: workload
    required: true
    images:
      - $KB_WORKLOAD_IMAGE
    manifests:
      - name: workload
        namespace: bench
        files: [workload.yaml]
EOF
cat >"$work/pkg/workload.yaml" <<EOF
apiVersion: apps/v1
kind: Deployment
metadata:
  name: workload
  namespace: bench
spec:
  replicas: 2
  selector: {matchLabels: {app: workload}}
  template:
    metadata: {labels: {app: workload}}
    spec:
      containers:
        - name: workload
          image: "###ZARF_REGISTRY###/$KB_WORKLOAD_IMAGE"
          ports: [{containerPort: 8080}]
          readinessProbe: {httpGet: {path: /, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata:
  name: workload
  namespace: bench
spec:
  selector: {app: workload}
  ports: [{port: 80, targetPort: 8080}]
EOF
t=$(now)
(cd "$work/pkg" && zarf package create . --confirm -o "$work" --no-color \
  --signing-key "$root/testdata/keys/cosign.key" --signing-key-pass testpass >"$work/pkg.log" 2>&1) ||
  fail "zarf package create (workload): $(tail -5 "$work/pkg.log")"
m "zarf package create" "$t"
pkg=$(ls "$work"/zarf-package-bench-workload-*.tar.zst)

kubectl-bundle-slot preflight a
t=$(now)
kubectl-bundle-slot create a
m "slot create a" "$t"
kubectl --context kind-kb-e2e-a wait --for=condition=Ready node --all --timeout=180s >/dev/null
docker ps --filter name=^kb-e2e-registry-a$ --format '{{.Ports}}' | grep -q "127.0.0.1:$port->5000/tcp" ||
  fail "registry kb-e2e-registry-a does not publish 127.0.0.1:$port"
curl --fail --silent "http://127.0.0.1:$port/v2/" >/dev/null || fail "GET /v2/ on 127.0.0.1:$port"
kubectl-bundle-slot create a | grep -q 'nothing to do' || fail "create again is not a no-op"

t=$(now)
kubectl-bundle-verify "$pkg" --key "$root/testdata/keys/cosign.pub" --stage >/dev/null
digest=$(sha256sum "$pkg" | cut -d' ' -f1)
kubectl-bundle-slot deploy a "$digest" --key "$root/testdata/keys/cosign.pub"
m "slot deploy a" "$t"
kubectl --context kind-kb-e2e-a -n bench rollout status deploy/workload --timeout=120s >/dev/null ||
  fail "Deployment bench/workload is not Available"
images=$(kubectl --context kind-kb-e2e-a -n bench get pods -l app=workload -o jsonpath='{range .items[*]}{.status.containerStatuses[0].image}{"\n"}{end}')
echo "$images" | grep -qv "^127.0.0.1:$port/" && fail "pods run images not from the slot's registry: $images"
[ "$(echo "$images" | grep -c "^127.0.0.1:$port/")" = 2 ] || fail "want 2 pods from 127.0.0.1:$port, got: $images"
curl --fail --silent "http://127.0.0.1:$port/v2/_catalog" | grep -q kb-bench/workload || fail "the registry's catalog lacks kb-bench/workload"

docker stats --no-stream --format '{{.Name}} {{.MemUsage}} {{.CPUPerc}}' | grep '^kb-e2e' | tee -a "$measure"

t=$(now)
kubectl-bundle-slot destroy a
m "slot destroy a" "$t"
if docker ps -a --format '{{.Names}}' | grep -q '^kb-e2e-'; then
  fail "containers left after destroy"
fi
echo "e2e-kind: PASS"
