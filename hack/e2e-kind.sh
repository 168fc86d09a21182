#!/usr/bin/env bash
# e2e-kind.sh: kubectl-bundle-slot on real parts: a real Docker engine, real
# kind clusters from the node image built here (hack/images/build.sh), the
# slot's registry container (distribution v3) on its published port, the
# real zarf deploying a signed package whose Deployment becomes Available
# from pods running the image that registry serves.
#
#   hack/e2e-kind.sh core   the part make test runs: slot create/deploy, the
#                           gate on real readiness, switch proved from a
#                           container on the kind network, blue-green.sh
#                           apply/revert/apply/accept over two real clusters,
#                           the outage a client sees at each switch, and the
#                           docker fake's templates against the real docker
#   hack/e2e-kind.sh all    (make e2e-kind) core, then in-place.sh and
#                           recreate.sh on a real slot, a SIGKILL inside
#                           a real deploy step with a re-run that converges,
#                           then adopt
#   hack/e2e-kind.sh adopt  (make e2e-kind-adopt) only slot adopt of a site
#                           built as stage-and-create-cluster.sh builds it,
#                           then blue-green.sh over it (hack/e2e-kind-adopt.sh)
#   hack/e2e-kind.sh flux   (make e2e-kind-flux) only Flux on the bench: each
#                           slot's Flux reconciles the krops-shaped config
#                           artifact from its registry; slot b's Cluster gets
#                           slot b's name (hack/e2e-kind-flux.sh)
#
# Both run under hack/docker/ensure.sh run (a Docker engine that can run
# --privileged).
#
# Uses its own state dir, kubeconfig, cluster prefix (kb-e2e), registry name
# and port base, so it never touches the operator's slots; everything it
# creates it removes. Measurements go to $E2E_MEASURE (default
# bin/e2e-kind-measurements.txt).
set -o errexit -o nounset -o pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin="$root/bin"
PATH="$bin:$bin/testbin:$PATH"
suite=${1:-all}
case $suite in core | all | adopt | flux) ;; *)
  echo "usage: hack/e2e-kind.sh [core|all|adopt|flux] [--after FILE]" >&2
  exit 2
  ;;
esac
# --after FILE (make test): build the images at once, then wait until FILE
# says "go" (the tools and plugins are built) or "stop" (they failed).
after=
if [ "${2:-}" = --after ]; then
  after=${3:?--after needs a file}
fi
measure=${E2E_MEASURE:-$bin/e2e-kind-measurements.txt}
: >"$measure"

docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || {
  echo "e2e-kind: Docker is not reachable (run it through hack/docker/ensure.sh run)" >&2
  exit 3
}

now() { date +%s%N; }
# m NAME START: records the seconds since START.
m() {
  local ms=$((($(now) - $2) / 1000000))
  printf '%-28s %4d.%01d s\n' "$1" $((ms / 1000)) $((ms % 1000 / 100)) | tee -a "$measure"
}
# Every check goes through check (hack/e2e-check.sh): its command runs to
# its end, and when the check fails the log has the command, its exit code
# and its whole output. A command that fails outside a check is named by
# the ERR trap (its output is in the log already).
# shellcheck source=hack/e2e-check.sh
. "$root/hack/e2e-check.sh"
set -o errtrace
trap 'on_err $? "$BASH_COMMAND" "$LINENO"' ERR

t=$(now)
# The images build in make test's low-weight cgroup (hack/lowcpu.sh), as
# the go tests run: on a cold machine they build beside those tests at nice
# 10, and in a cgroup of higher weight they would take the cores from them.
images_env=$("$root/hack/lowcpu.sh" "$root/hack/images/build.sh")
# shellcheck disable=SC1090
. "$images_env"
m images "$t"

if [ -n "$after" ]; then
  echo "e2e-kind: images ready; waiting for the tools and plugins ($after)"
  until [ -s "$after" ]; do sleep 2; done
  [ "$(cat "$after")" = go ] || {
    echo "e2e-kind: the tools or plugins did not build; not run" >&2
    exit 1
  }
fi
command -v zarf >/dev/null || {
  echo "e2e-kind: zarf is missing (make testbin)" >&2
  exit 3
}

work=$(mktemp -d)
check_dir="$work/checks"
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
export KUBECTL_BUNDLE_REGISTRY_ALIAS=kb-e2e-registry
export KUBECTL_BUNDLE_SOAK_WINDOW=1h
# The site's 1m for zarf init is too short on a shared bench machine: at
# load 30-40 a slot's zarf init (the agent's Helm install and health
# checks) ran past it and the second apply failed. The timeouts themselves
# are tested on the fakes.
export KUBECTL_BUNDLE_ZARF_INIT_TIMEOUT=${E2E_ZARF_INIT_TIMEOUT:-5m}
export ZARF_LOG_FORMAT=console
# The strategy scripts check that the site is offline before they change
# anything (on by default, waiting up to 900 s): skipped here, and said.
export SKIP_OFFLINE_CHECK=1
echo "e2e-kind: the offline check is skipped (SKIP_OFFLINE_CHECK=1): this machine's uplink is not the site's"
# The node mounts the engine's socket (CAPD drives Docker through it).
case ${DOCKER_HOST:-} in
unix://*) export KUBECTL_BUNDLE_DOCKER_SOCKET=${DOCKER_HOST#unix://} ;;
esac

# shellcheck source=hack/e2e-kind-adopt.sh
. "$root/hack/e2e-kind-adopt.sh"
# shellcheck source=hack/e2e-kind-flux.sh
. "$root/hack/e2e-kind-flux.sh"

cleanup() {
  rc=$?
  jobs -p | xargs -r kill 2>/dev/null || true
  for s in a b; do
    if [ "$rc" != 0 ] && [ -f "$work/state/slots/$s.json" ]; then
      echo "--- slot $s's pods" >&2
      kubectl --context "kind-kb-e2e-$s" get pods -A -o wide 2>&1 | tail -20 >&2 || true
    fi
    kubectl-bundle-slot destroy "$s" --force --yes >/dev/null 2>&1 || true
  done
  adopt_cleanup "$rc"
  flux_cleanup "$rc"
  docker ps -aq --filter label=dev.kubectl-bundle.e2e | xargs -r docker rm -f >/dev/null 2>&1 || true
  # Whatever a refused or failed destroy left of the bench's slots (the
  # kind nodes and registries carry the bench's name prefix): a next run's
  # preflight would refuse their names.
  if [ "$rc" != 0 ]; then
    docker ps -aq --filter name=^kb-e2e- | xargs -r docker rm -f >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT

# The archives a site receives: the node and registry images, and an init
# package for an external registry (the slot's) carrying zarf's agent. Zarf's
# own init package cannot be built here: its injector is Rust (no crate
# registry is reachable) and its images come from a container registry. Its
# agent component can: the agent is the zarf binary itself (zarf's Dockerfile
# copies it onto a static base and runs `zarf internal agent` as 65532), so
# the image is the pinned zarf we built, imported the same way, and the
# component is zarf's own (packages/zarf-agent in the pinned module).
mkdir -p "$work/archives" "$work/init"
t=$(now)
zarf_version=$(zarf version)
agent_ref="kb-bench/zarf-agent:$zarf_version"
check "the pinned zarf module is not in the module cache (make testbin)" -- \
  go -C "$root/hack/tools" list -m -f '{{.Dir}}' github.com/zarf-dev/zarf
zarf_mod=$checked
mkdir -p "$work/img-agent/tmp"
cp "$(command -v zarf)" "$work/img-agent/zarf"
chmod 0700 "$work/img-agent/zarf"
chmod 1777 "$work/img-agent/tmp"
tar -C "$work/img-agent" --owner=65532 --group=65532 -c . |
  docker import -c 'USER 65532:65532' \
    -c 'CMD ["/zarf", "internal", "agent", "--log-level=info", "--log-format=console", "--no-color"]' \
    - "$agent_ref" >/dev/null
rm -rf "$work/img-agent"
cp -r "$zarf_mod/packages/zarf-agent" "$work/init/zarf-agent"
chmod -R u+w "$work/init/zarf-agent"
ln -s "$KB_BENCH_IMAGES/node.tar" "$work/archives/node.tar"
ln -s "$KB_BENCH_IMAGES/registry.tar" "$work/archives/registry.tar"
# What stage-and-create-cluster.sh pushes into the site's registry, in the
# archives: a Flux config directory and a Helm chart. slot create seeds each
# slot's own registry (distribution) with them.
mkdir -p "$work/archives/config-artifact/workload" "$work/chart/bench/templates" "$work/archives/charts"
printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: []\n' >"$work/archives/config-artifact/workload/kustomization.yaml"
printf 'apiVersion: v2\nname: bench\nversion: 0.1.0\n' >"$work/chart/bench/Chart.yaml"
printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bench\n' >"$work/chart/bench/templates/cm.yaml"
tar -C "$work/chart" -czf "$work/archives/charts/bench-0.1.0.tgz" bench
mkdir -m 0700 "$work/state"
cat >"$work/state/config.yaml" <<'EOF'
kind: Config
workloadClusters: [kb-e2e-wl]
seed:
  - {ref: krops:latest, path: config-artifact}
  - {ref: charts, path: charts/bench-0.1.0.tgz}
EOF
cat >"$work/init/zarf.yaml" <<'EOF'
kind: ZarfInitConfig
metadata:
  name: init
  description: the bench's init package for an external registry (the slot's)
components:
  - name: zarf-agent
    required: true
    import:
      path: zarf-agent
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
check "zarf package create (init)" --both -- in_dir "$work/init" zarf package create . --confirm --skip-sbom -o "$work/archives" --no-color \
  --set AGENT_IMAGE_DOMAIN= --set AGENT_IMAGE=kb-bench/zarf-agent --set "AGENT_IMAGE_TAG=$zarf_version"
m "agent image + init package" "$t"
if [ "$suite" = flux ]; then
  flux_part
  echo "e2e-kind $suite: PASS"
  exit 0
fi

# The workload packages, v1 and v2: a Deployment and a Service of the
# workload image, named without a registry as a site's package names it;
# zarf's agent points the pods at the slot's registry. v2 carries the image under another tag, so the
# registry a client reaches says which slot it is.
docker load -i "$KB_BENCH_IMAGES/workload.tar" >/dev/null
# workload_image VERSION: the workload image tagged for VERSION (tagged here).
workload_image() {
  local ref=${KB_WORKLOAD_IMAGE%%:*}:$1-${KB_WORKLOAD_IMAGE##*-}
  docker tag "$KB_WORKLOAD_IMAGE" "$ref"
  echo "$ref"
}
v2_image=$(workload_image 2.0.0)
# make_pkg VERSION IMAGE [NAME [fixed]]: the signed workload package NAME
# (default bench-workload); "fixed" leaves out the SLOT variable, as a
# package built before the slots names everything once.
make_pkg() {
  local dir="$work/pkg-$1" name=${3:-bench-workload} slot_var slot_label
  slot_var='# Fit for blue/green (S2): the slot'"'"'s name reaches the package; nothing it
# makes lives on the shared Docker daemon or network.
variables:
  - name: SLOT
    description: the slot deployed into (kubectl bundle-slot deploy sets it)'
  slot_label=', slot: "###ZARF_VAR_SLOT###"'
  if [ "${4:-}" = fixed ]; then slot_var='' slot_label=''; fi
  mkdir -p "$dir"
  cat >"$dir/zarf.yaml" <<EOF
kind: ZarfPackageConfig
metadata:
  name: $name
  version: $1
$slot_var
components:
  - name: workload
    required: true
    images:
      - $2
    manifests:
      - name: workload
        namespace: bench
        files: [workload.yaml]
    healthChecks:
      - {apiVersion: apps/v1, kind: Deployment, namespace: bench, name: workload}
EOF
  cat >"$dir/workload.yaml" <<EOF
apiVersion: apps/v1
kind: Deployment
metadata:
  name: workload
  namespace: bench
  labels: {version: "$1"}
spec:
  replicas: 2
  selector: {matchLabels: {app: workload}}
  template:
    metadata: {labels: {app: workload, version: "$1"$slot_label}}
    spec:
      containers:
        - name: workload
          image: "$2"
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
  check "zarf package create ($name $1)" --both -- in_dir "$dir" zarf package create . --confirm -o "$work" --no-color \
    --signing-key "$root/testdata/keys/cosign.key" --signing-key-pass testpass
  ls "$work/zarf-package-$name-"*"-$1.tar.zst"
}
t=$(now)
pkg1=$(make_pkg 1.0.0 "$KB_WORKLOAD_IMAGE")
pkg2=$(make_pkg 2.0.0 "$v2_image")
m "zarf package create x2" "$t"
key="$root/testdata/keys/cosign.pub"

# The gate on real readiness: the default gate's checks that make sense
# without Flux and Cluster API (every image from the slot's registries,
# the package's health checks) and the workload's own.
gate="$work/gate.yaml"
cat >"$gate" <<'EOF'
apiVersion: kubectl-bundle.dev/v1alpha1
kind: Gate
metadata:
  name: bench
spec:
  pollInterval: 2s
  checks:
  - name: images
    images:
      allowedRegistries: ["@slot"]
      ignore: [registry.k8s.io/*]
  - name: nodes
    nodes: {min: 1}
  - name: workload
    resource: {apiVersion: apps/v1, kind: Deployment, namespace: bench, name: workload, condition: Available}
  - name: pods
    pods: {namespace: bench, selector: app=workload, min: 2}
  - name: zarf-packages
    zarf: {}
EOF

# What a client on the kind network and one using the alias context see:
# the alias context $alias_ctx, the registry alias $registry_alias, slot S's
# node $node_prefix-S-control-plane (the adopt part sets its own).
probe_image=$KB_NODE_IMAGE
alias_ctx=kind-kb-e2e registry_alias=kb-e2e-registry node_prefix=kb-e2e
alias_node() { kubectl --context "$alias_ctx" get nodes -o jsonpath='{.items[0].metadata.name}'; }
registry_tags() {
  docker run --rm --network kind --label dev.kubectl-bundle.e2e=1 --entrypoint curl "$probe_image" \
    -fsS "http://$registry_alias:5000/v2/${KB_WORKLOAD_IMAGE%%:*}/tags/list"
}
expect_active() { # SLOT VERSION [NODE]
  local want=${3:-$node_prefix-$1-control-plane}
  check "the alias context $alias_ctx does not reach slot $1's $want" --is "$want" -- alias_node
  check "the registry alias $registry_alias does not serve slot $1's tags ($2-*) from the kind network" \
    --has "\"${2//./[.]}-" -- registry_tags
  check "the alias context's workload is not $2" --is "$2" -- \
    kubectl --context "$alias_ctx" -n bench get deploy workload -o jsonpath='{.metadata.labels.version}'
  echo "e2e-kind: slot $1 is active: alias context on $want, registry alias serves $2"
}

# The outage a client sees during a switch: a loop of requests through the
# alias context (the API server's service proxy to the workload) and one
# through the registry alias (from a container on the kind network).
outage_start() { # NAME
  local n=$1
  (
    ok=0 bad=0 t0=$(now)
    while [ ! -f "$work/stop-$n" ]; do
      if kubectl --context "$alias_ctx" --request-timeout=2s get --raw /api/v1/namespaces/bench/services/workload:80/proxy/ >/dev/null 2>&1; then
        ok=$((ok + 1))
      else bad=$((bad + 1)); fi
    done
    echo "$ok $bad $((($(now) - t0) / 1000000))" >"$work/outage-$n-context"
  ) &
  docker run -d --name "kb-e2e-probe-$n" --network kind --label dev.kubectl-bundle.e2e=1 --env "ALIAS=$registry_alias" --entrypoint bash "$probe_image" -c \
    'ok=0; bad=0; t0=$(date +%s%N); while [ ! -f /tmp/stop ]; do if curl -fsS -m 2 -o /dev/null "http://$ALIAS:5000/v2/"; then ok=$((ok+1)); else bad=$((bad+1)); fi; sleep 0.05; done; echo "$ok $bad $((($(date +%s%N)-t0)/1000000))" >/tmp/result; sleep 600' >/dev/null
  sleep 2
}
rate() { awk -v n="$1" -v ms="$2" 'BEGIN { printf "%.1f", (ms > 0) ? n * 1000 / ms : 0 }'; }
outage_stop() { # NAME
  local n=$1 r ok bad ms
  touch "$work/stop-$n"
  docker exec "kb-e2e-probe-$n" touch /tmp/stop
  wait
  for _ in $(seq 50); do docker exec "kb-e2e-probe-$n" test -f /tmp/result && break; sleep 0.2; done
  r=$(docker exec "kb-e2e-probe-$n" cat /tmp/result)
  docker rm -f "kb-e2e-probe-$n" >/dev/null
  read -r ok bad ms <"$work/outage-$n-context"
  printf '%-28s %d of %d requests failed through the alias context (%s/s)\n' "outage $n" "$bad" $((ok + bad)) "$(rate $((ok + bad)) "$ms")" | tee -a "$measure"
  read -r ok bad ms <<<"$r"
  printf '%-28s %d of %d requests failed through the registry alias (%s/s)\n' "outage $n" "$bad" $((ok + bad)) "$(rate $((ok + bad)) "$ms")" | tee -a "$measure"
}

# with_outage NAME LABEL CMD...: runs CMD inside the outage loops, timed.
with_outage() {
  local n=$1 label=$2 t
  shift 2
  t=$(now)
  outage_start "$n"
  "$@" || fail "exit code $? from: $(printf '%q ' "$@")(its output is above)"
  outage_stop "$n"
  m "$label" "$t"
}

if [ "$suite" = adopt ]; then
  adopt_part
  echo "e2e-kind $suite: PASS"
  exit 0
fi

# The first install, by hand, as blue-green's refusal on a fresh site advises.
kubectl-bundle-slot preflight a
t=$(now)
kubectl-bundle-slot create a
m "slot create a" "$t"
check "registry kb-e2e-registry-a does not publish 127.0.0.1:$port" --has "127\.0\.0\.1:$port->5000/tcp" -- \
  docker ps --filter 'name=^kb-e2e-registry-a$' --format '{{.Ports}}'
check "GET /v2/ on 127.0.0.1:$port" -- curl -fsS "http://127.0.0.1:$port/v2/"
check "slot a's registry was not seeded with krops:latest" --has '"latest"' -- curl -fsS "http://127.0.0.1:$port/v2/krops/tags/list"
check "slot a's registry was not seeded with charts/bench:0.1.0" --has '"0\.1\.0"' -- curl -fsS "http://127.0.0.1:$port/v2/charts/bench/tags/list"
# Not `describe a | grep -q`: grep leaves at the seed's row and describe,
# still writing the rows after it, dies of SIGPIPE (issue 31).
check "slot a's record does not keep the seed of krops:latest" \
  --has 'seeded +krops:latest sha256:[0-9a-f]{64} \(flux-artifact from config-artifact, pushed\)' -- kubectl-bundle-slot describe a
echo "e2e-kind: slot a's registry seeded (krops:latest, charts/bench:0.1.0)"
check "create again is not a no-op" --has 'nothing to do' -- kubectl-bundle-slot create a
t=$(now)
check "kubectl-bundle-verify --stage of 1.0.0" -- kubectl-bundle-verify "$pkg1" --key "$key" --stage
kubectl-bundle-slot deploy a "$pkg1" --key "$key"
m "slot deploy a" "$t"
check "pods run images not from the slot's registry" --has . --all "^127\.0\.0\.1:$port/" -- \
  kubectl --context kind-kb-e2e-a -n bench get pods -l app=workload -o jsonpath='{range .items[*]}{.status.containerStatuses[0].image}{"\n"}{end}'
images=$checked
# The package names its image as the site's do (no registry); zarf's agent,
# built here from the pinned zarf, pointed the pods at the slot's registry.
check "zarf's agent (agent-hook) is not available in slot a" --is 2 -- \
  kubectl --context kind-kb-e2e-a -n zarf get deploy agent-hook -o jsonpath='{.status.availableReplicas}'
check "zarf's agent patched fewer than 2 workload pods" --has '^[^ ]+ [^ ]+ ' -- \
  kubectl --context kind-kb-e2e-a -n bench get pods -l app=workload,zarf-agent=patched -o jsonpath='{range .items[*]}{.metadata.name} {end}'
patched=$(wc -w <<<"$checked")
echo "e2e-kind: zarf's agent patched $patched workload pods to ${images%%$'\n'*}"
# Services answer from the node's own network through kube-proxy's rules, with
# two endpoints behind the Service (the API server reaches zarf's agent that
# way; a rule kube-proxy cannot write leaves the ClusterIP unrouted).
# kube-proxy writes a Service's rules a moment after its endpoints become
# ready (until then the ClusterIP rejects: "connection refused" after 0 ms,
# seen once on a cold run), so the check tries for up to 30 s.
svc_ip=$(kubectl --context kind-kb-e2e-a -n bench get svc workload -o jsonpath='{.spec.clusterIP}')
for _ in $(seq 1 29); do
  docker exec kb-e2e-a-control-plane curl -fsS -m 5 "http://$svc_ip/" >/dev/null 2>&1 && break
  sleep 1
done
check "the workload's Service $svc_ip does not answer the workload from the node within 30 s" --has '^workload ' -- \
  docker exec kb-e2e-a-control-plane curl -fsS -m 5 "http://$svc_ip/"
check "kube-proxy could not write its rules" --rc any --both --lacks 'Failed to execute iptables-restore' -- \
  kubectl --context kind-kb-e2e-a -n kube-system logs ds/kube-proxy
t=$(now)
kubectl-bundle-gate --slot a -f "$gate" --timeout 3m --record
m "gate a" "$t"
# The gate fails a pod whose image comes from another registry.
# (zarf's agent would point it at the slot's registry: the label keeps it away, as a pod
# the agent never saw.)
kubectl --context kind-kb-e2e-a -n bench run intruder --image=registry.example/intruder:1 --restart=Never --labels=zarf.dev/agent=ignore >/dev/null
check "the gate does not fail a pod from registry.example naming its foreign image" --rc nonzero --both \
  --has 'ForeignImage.*registry\.example/intruder:1' -- kubectl-bundle-gate --slot a -f "$gate" --once
kubectl --context kind-kb-e2e-a -n bench delete pod intruder --wait=false >/dev/null
t=$(now)
kubectl-bundle-switch to a
m "switch to a" "$t"
expect_active a 1.0.0

# blue-green over the two real clusters: apply, revert, apply, accept.
kubectl-bundle-slot preflight b | tee "$work/preflight-b" | grep memory | sed 's/^/preflight b: /' | tee -a "$measure"
with_outage apply-1 "blue-green apply (b)" "$root/scripts/blue-green.sh" apply "$pkg2" --key "$key" --gate "$gate" --gate-timeout 5m
expect_active b 2.0.0
docker stats --no-stream --format '{{.Name}} {{.MemUsage}} {{.CPUPerc}}' | grep '^kb-e2e' | sed 's/^/two slots: /' | tee -a "$measure"
# Discarding slot b loses what its registry holds: without a terminal,
# revert refuses until --yes says so, and changes nothing.
check "revert without --yes does not refuse, listing slot b's registry content" --rc nonzero --both \
  --has "registry repository ${KB_WORKLOAD_IMAGE%%:*}" -- "$root/scripts/blue-green.sh" revert
expect_active b 2.0.0
with_outage revert "blue-green revert" "$root/scripts/blue-green.sh" revert --yes
expect_active a 1.0.0
check "slot b's containers are left after revert" --lacks '^kb-e2e-b-|^kb-e2e-registry-b$' -- docker ps -a --format '{{.Names}}'
with_outage apply-2 "blue-green apply again (b)" "$root/scripts/blue-green.sh" apply "$pkg2" --key "$key" --gate "$gate" --gate-timeout 5m
expect_active b 2.0.0
t=$(now)
"$root/scripts/blue-green.sh" accept --yes
m "blue-green accept" "$t"
expect_active b 2.0.0
check "slot a's containers are left after accept" --lacks '^kb-e2e-a-|^kb-e2e-registry-a$' -- docker ps -a --format '{{.Names}}'
check "journal status fails after accept" -- kubectl-bundle-journal status
head -3 <<<"$checked"
check "slot b fails its gate after accept" -- kubectl-bundle-gate --slot b -f "$gate" --once
docker stats --no-stream --format '{{.Name}} {{.MemUsage}} {{.CPUPerc}}' | grep '^kb-e2e' | sed 's/^/one slot: /' | tee -a "$measure"

# The docker fake's templates, against the real docker.
check "the docker fake's templates differ from the real docker's output" --both -- \
  env KB_REAL_DOCKER=1 KB_REAL_DOCKER_IMAGE="$KB_REGISTRY_IMAGE" go -C "$root" test -count=1 -run TestTemplatesAgainstRealDocker ./internal/fakes/

if [ "$suite" = all ]; then
  # shellcheck source=hack/e2e-kind-more.sh
  . "$root/hack/e2e-kind-more.sh"
fi

# The last slot standing: b after the core; a after the S1 part of all.
last=$(kubectl-bundle-switch status -o 'jsonpath={.active}')
t=$(now)
kubectl-bundle-slot destroy "$last" --force --yes
m "slot destroy $last" "$t"
check "containers left after destroy" --lacks '^kb-e2e-' -- docker ps -a --format '{{.Names}}'
if [ "$suite" = all ]; then
  adopt_part
  flux_part
fi
echo "e2e-kind $suite: PASS"
