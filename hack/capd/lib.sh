# lib.sh: what the CAPD experiments (hack/capd/*.sh) share; sourced, not run.
#
# A management cluster is a kind cluster from the bench's node image with
# the Docker socket mounted (as `slot create` makes one), the bench's
# Cluster API (hack/images/capi.sh) installed from its rendered manifests.
# A workload cluster is a CAPD Cluster of one control-plane machine from
# the same node image, its load balancer the bench's haproxy image. kubectl
# runs inside the node containers (the node image carries it), so the
# experiments need no kubectl on the host.
#
# Everything an experiment creates is named kb-capd-* and removed by
# capd_cleanup (kind clusters, and every container labelled with a
# kb-capd-* CAPD cluster, orphans included).
# shellcheck shell=bash

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
GO=${GO:-go}
PATH="$root/bin/testbin:$PATH"
work=${KB_CAPD_WORK:-$root/bin/capd}
mkdir -p "$work"

say() { echo "capd: $*" >&2; }
die() {
  say "FAIL: $*"
  exit 1
}
now() { date +%s%N; }
# secs START: seconds since START (one decimal).
secs() {
  local ms=$((($(now) - $1) / 1000000))
  printf '%d.%01d' $((ms / 1000)) $((ms % 1000 / 100))
}
# result NAME VALUE: one line of the experiment's numbers, on stdout and in
# $work/results.txt.
result() { printf '%-44s %s\n' "$1" "$2" | tee -a "$work/results.txt"; }

capd_init() {
  docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || die "Docker is not reachable (run through hack/docker/ensure.sh run)"
  local images_env capi_env
  images_env=${KB_IMAGES_ENV:-$("$root/hack/lowcpu.sh" "$root/hack/images/build.sh")}
  capi_env=${KB_CAPI_ENV:-$("$root/hack/lowcpu.sh" "$root/hack/images/capi.sh")}
  # shellcheck disable=SC1090
  . "$images_env"
  # shellcheck disable=SC1090
  . "$capi_env"
  command -v kind >/dev/null 2>&1 || die "no kind on PATH (make e2e-kind-capd builds bin/testbin/kind)"
  case ${DOCKER_HOST:-} in
  unix://*) docker_sock=${DOCKER_HOST#unix://} ;;
  "") docker_sock=/var/run/docker.sock ;;
  *) die "DOCKER_HOST=$DOCKER_HOST is not a unix socket: CAPD mounts the engine's socket" ;;
  esac
  local a id ref
  while read -r a id; do
    docker image inspect "$id" >/dev/null 2>&1 || docker load -i "$a" >/dev/null
  done <<EOF
$KB_BENCH_IMAGES/node.tar $KB_NODE_IMAGE_ID
$KB_BENCH_IMAGES/workload.tar $KB_WORKLOAD_IMAGE_ID
EOF
  for ref in "$KB_NODE_IMAGE" "$KB_WORKLOAD_IMAGE"; do
    docker image inspect "$ref" >/dev/null 2>&1 || die "image $ref is not in the engine after loading its archive"
  done
  capi_load
  : >"$work/results.txt"
  say "node $KB_NODE_IMAGE, Cluster API $KB_CAPI_VERSION, CAPD $KB_CAPD_VERSION, load balancer $KB_HAPROXY_IMAGE"
}

# capi_load: the Cluster API images of the capi.env sourced last (KB_CAPI_*)
# into the engine.
capi_load() {
  local a id ref
  while read -r a id; do
    docker image inspect "$id" >/dev/null 2>&1 || docker load -i "$a" >/dev/null
  done <<EOF
$KB_CAPI_DIR/capi-manager.tar $KB_CAPI_IMAGE_ID
$KB_CAPI_DIR/kubeadm-bootstrap-manager.tar $KB_CABPK_IMAGE_ID
$KB_CAPI_DIR/kubeadm-control-plane-manager.tar $KB_KCP_IMAGE_ID
$KB_CAPI_DIR/capd-manager.tar $KB_CAPD_IMAGE_ID
$KB_CAPI_DIR/haproxy.tar $KB_HAPROXY_IMAGE_ID
EOF
  for ref in "$KB_CAPI_IMAGE" "$KB_CABPK_IMAGE" "$KB_KCP_IMAGE" "$KB_CAPD_IMAGE" "$KB_HAPROXY_IMAGE"; do
    docker image inspect "$ref" >/dev/null 2>&1 || die "image $ref is not in the engine after loading its archive"
  done
}

# capi_older: prints the capi.env of the older Cluster API
# (hack/tools/capi-v1.13, built by hack/images/capi.sh like the site's,
# cached by its own pins), its images loaded into the engine;
# KB_CAPI_OLD_ENV names one to use instead.
capi_older() {
  local env
  env=${KB_CAPI_OLD_ENV:-$("$root/hack/lowcpu.sh" "$root/hack/images/capi.sh" "$root/hack/tools/capi-v1.13")} ||
    die "building the older Cluster API (hack/images/capi.sh hack/tools/capi-v1.13)"
  with_capi "$env" capi_load
  echo "$env"
}

# with_capi ENV CMD...: CMD (a function of this file) with the Cluster API
# of capi.env ENV instead of the site's, in a subshell whose failure ends
# the experiment.
with_capi() {
  local env=$1
  shift
  (
    # shellcheck disable=SC1090
    . "$env"
    "$@"
  ) || exit 1
}

# capd_begin: what every experiment does first: the images loaded
# (capd_init), anything kb-capd-* left by an earlier run removed, the same
# cleanup (request loops stopped, kb-capd-* removed) at exit, and the
# date, machine and load as the first numbers.
capd_begin() {
  capd_init
  trap capd_end EXIT
  capd_cleanup
  result "date" "$(date -u +%Y-%m-%dT%H:%MZ)"
  result "machine" "$(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
  result "load average at start" "$(load_line)"
}
# capd_begin_site: capd_begin for an experiment that runs the plugins
# (bin/, make build) on a site: every management cluster's context in one
# kubeconfig ($work/site.kubeconfig, exported as KB_CAPD_KUBECONFIG).
capd_begin_site() {
  export KB_CAPD_KUBECONFIG="$work/site.kubeconfig"
  # A site of its own each run: a previous run's state dir and kubeconfig
  # name clusters that are gone (a second run found slot a "already
  # created" with the old cluster's port, and its gate refused).
  rm -rf "$work/state" "$KB_CAPD_KUBECONFIG"
  PATH="$root/bin:$PATH"
  local p
  for p in kubectl-bundle-slot kubectl-bundle-switch kubectl-bundle-gate; do
    command -v "$p" >/dev/null || die "no $p in $root/bin (make build)"
  done
  capd_begin
}
capd_end() {
  local f
  for f in "${!loop_pids[@]}"; do loop_stop "$f"; done
  [ -z "${sampler_pid:-}" ] || kill "$sampler_pid" 2>/dev/null || true
  capd_cleanup
}

# plugin ARGS...: a call of the plugins (bin/, make build), echoed, its
# output in the experiment's log.
plugin() {
  echo "+ $*" >&2
  "$@" >&2
}
# kind_slot_state SLOT...: a state dir ($work/state, exported as
# KUBECTL_BUNDLE_STATE_DIR) whose config names the management clusters
# kb-capd-SLOT and their workload clusters kb-capd-wl-SLOT, with the
# record slot create writes for each kind slot SLOT whose cluster runs
# (this bench builds the management cluster itself: no registry, no Zarf).
kind_slot_state() {
  local s
  export KUBECTL_BUNDLE_STATE_DIR="$work/state" NO_COLOR=1
  mkdir -p "$work/state/slots"
  chmod 0700 "$work/state"
  cat >"$work/state/config.yaml" <<'EOF'
kind: Config
provider: kind
clusterPrefix: kb-capd
workloadClusters: [kb-capd-wl]
EOF
  for s in "$@"; do
    cat >"$work/state/slots/$s.json" <<EOF
{"apiVersion": "kubectl-bundle.dev/v1alpha1", "kind": "Slot", "name": "$s", "provider": "kind",
 "cluster": "kb-capd-$s", "context": "kind-kb-capd-$s", "kubeconfig": "${KB_CAPD_KUBECONFIG:-$work/kb-capd-$s.kubeconfig}", "state": "ready"}
EOF
  done
}

# providers_gate: the gate of a bench slot, $work/gate.yaml: Cluster API's
# and CAPD's controllers run (the bench's slots hold no package).
providers_gate() {
  cat >"$work/gate.yaml" <<'EOF'
apiVersion: kubectl-bundle.dev/v1alpha1
kind: Gate
metadata: {name: capd-providers}
spec:
  checks:
  - name: capi
    resource: {apiVersion: apps/v1, kind: Deployment, namespace: capi-system, name: capi-controller-manager}
  - name: capd
    resource: {apiVersion: apps/v1, kind: Deployment, namespace: capd-system, name: capd-controller-manager}
EOF
}

# mk MGMT ARGS...: kubectl in management cluster MGMT's node.
mk() {
  local c=$1
  shift
  docker exec -i "$c-control-plane" kubectl --kubeconfig /etc/kubernetes/admin.conf "$@"
}

# wl_nodes CLUSTER: the running control-plane containers of CAPD cluster CLUSTER.
wl_nodes() {
  docker ps --filter "label=io.x-k8s.kind.cluster=$1" --filter label=io.x-k8s.kind.role=control-plane --format '{{.Names}}' | sort
}
# wk NODE ARGS...: kubectl in a workload cluster, from its control-plane node.
wk() {
  local n=$1
  shift
  docker exec -i "$n" kubectl --kubeconfig /etc/kubernetes/admin.conf "$@"
}

# mgmt_create NAME: a management kind cluster (the Docker socket mounted)
# with the bench's Cluster API installed and Available (mgmt_install).
mgmt_create() {
  local c=$1 t
  t=$(now)
  cat >"$work/$c-kind.yaml" <<EOF
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
# Kubernetes v1.35 and later refuse cgroup v1 hosts unless told (as the
# slots' clusters are: slot.KubeletCgroupV1).
kubeadmConfigPatches:
- |
  apiVersion: kubelet.config.k8s.io/v1beta1
  kind: KubeletConfiguration
  failCgroupV1: false
nodes:
- role: control-plane
  image: $KB_NODE_IMAGE
  extraMounts:
  - hostPath: $docker_sock
    containerPath: /var/run/docker.sock
EOF
  kind create cluster --name "$c" --config "$work/$c-kind.yaml" --kubeconfig "${KB_CAPD_KUBECONFIG:-$work/$c.kubeconfig}" --wait 3m >"$work/$c-kind.log" 2>&1 ||
    die "kind create cluster $c: $(tail -5 "$work/$c-kind.log")"
  result "$c: kind create (s)" "$(secs "$t")"
  t=$(now)
  mgmt_install "$c"
  result "$c: Cluster API installed and Available (s)" "$(secs "$t")"
}

# mgmt_install NAME: the Cluster API of KB_CAPI_* (capi.env) applied to
# management cluster NAME, each provider's Deployment rolled out and
# Available; over other versions of the providers, an upgrade (or a
# downgrade) in place.
mgmt_install() {
  local c=$1
  kind load docker-image --name "$c" "$KB_CAPI_IMAGE" "$KB_CABPK_IMAGE" "$KB_KCP_IMAGE" "$KB_CAPD_IMAGE" >>"$work/$c-kind.log" 2>&1 ||
    die "kind load docker-image into $c: $(tail -5 "$work/$c-kind.log")"
  local m
  for m in core bootstrap-kubeadm control-plane-kubeadm infrastructure-docker; do
    mk "$c" apply --server-side --force-conflicts -f - <"$KB_CAPI_MANIFESTS/$m.yaml" >>"$work/$c-apply.log" 2>&1 ||
      die "applying $m into $c: $(tail -5 "$work/$c-apply.log")"
  done
  local ns d
  for ns in capi-system capi-kubeadm-bootstrap-system capi-kubeadm-control-plane-system capd-system; do
    mk "$c" -n "$ns" wait --for=condition=Available deployment --all --timeout=300s >>"$work/$c-apply.log" 2>&1 || {
      mk "$c" -n "$ns" get pods -o wide >&2 || true
      mk "$c" -n "$ns" logs deployment --all-containers --tail=30 >&2 || true
      die "the providers in $ns of $c are not Available in 300 s"
    }
    # Over older providers, Available counts the old pod: wait for the
    # new template's too.
    for d in $(mk "$c" -n "$ns" get deployments -o name); do
      mk "$c" -n "$ns" rollout status "$d" --timeout=300s >>"$work/$c-apply.log" 2>&1 ||
        die "$d in $ns of $c did not roll out in 300 s"
    done
  done
}

# mgmt_inventory MGMT: what clusterctl init adds to the providers it
# installs, which clusterctl's mover (the S3 pivot) reads: its provider
# inventory (the Provider CRD from the cluster-api module, one Provider per
# installed provider, at KB_CAPI_VERSION, CAPD at KB_CAPD_VERSION) and the
# clusterctl label on every Cluster API CRD.
mgmt_inventory() {
  local c=$1 v capi_mod p name ns type pname
  capi_mod=$(cd "$root/hack/tools/capi" && "$GO" list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api) ||
    die "the cluster-api module is not in the module cache (cd hack/tools/capi && go mod download)"
  mk "$c" apply --server-side -f - <"$capi_mod/cmd/clusterctl/config/manifest/clusterctl-api.yaml" >>"$work/$c-apply.log" 2>&1 ||
    die "applying clusterctl's inventory CRD into $c: $(tail -3 "$work/$c-apply.log")"
  mk "$c" wait --for=condition=Established crd/providers.clusterctl.cluster.x-k8s.io --timeout=60s >>"$work/$c-apply.log" 2>&1 ||
    die "clusterctl's inventory CRD is not Established in $c"
  # shellcheck disable=SC2046
  mk "$c" label --overwrite crd $(mk "$c" get crd -o name | sed -n 's#^customresourcedefinition.apiextensions.k8s.io/##p' |
    grep '\.x-k8s\.io$' | grep -v '^providers\.clusterctl\.') clusterctl.cluster.x-k8s.io= >>"$work/$c-apply.log" 2>&1 ||
    die "labelling the Cluster API CRDs of $c"
  for p in cluster-api:capi-system:CoreProvider:cluster-api bootstrap-kubeadm:capi-kubeadm-bootstrap-system:BootstrapProvider:kubeadm \
    control-plane-kubeadm:capi-kubeadm-control-plane-system:ControlPlaneProvider:kubeadm infrastructure-docker:capd-system:InfrastructureProvider:docker; do
    IFS=: read -r name ns type pname <<<"$p"
    v=$KB_CAPI_VERSION
    [ "$name" != infrastructure-docker ] || v=$KB_CAPD_VERSION
    mk "$c" apply -f - >>"$work/$c-apply.log" 2>&1 <<EOF || die "recording provider $name in $c's inventory"
apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3
kind: Provider
metadata:
  name: $name
  namespace: $ns
  labels: {clusterctl.cluster.x-k8s.io: "", cluster.x-k8s.io/provider: $name}
providerName: $pname
type: $type
version: $v
EOF
  done
}

# wl_apply MGMT CLUSTER: applies workload cluster CLUSTER (one control-plane
# machine; taints removed so the workload runs there; CAPD preloads the
# workload image into each machine, as a site's machines get theirs from
# the package) in MGMT, retrying while the providers' webhooks start to
# answer.
wl_apply() {
  local c=$1 wl=$2 _
  # CAPD's own haproxy template asks for maxconn 100000, which needs more
  # open files than a container of a Docker engine with a lower nofile
  # limit may have (the bench's has 20000): haproxy then exits at start
  # ("Cannot raise FD limit"). The template CAPD takes instead
  # (customHAProxyConfigTemplateRef, key value) leaves maxconn to haproxy.
  cat >"$work/$wl.yaml" <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: kb-capd-haproxy
  namespace: default
data:
  value: |
    global
      log stdout format raw local0 notice
    defaults
      log global
      mode tcp
      timeout connect 5s
      timeout client 50s
      timeout server 50s
    frontend control-plane
      bind *:{{ .FrontendControlPlanePort }}
      default_backend kube-apiservers
    backend kube-apiservers
      option httpchk GET /healthz
    {{- range $name, $b := .BackendServers }}
      server {{ $name }} {{ JoinHostPort $b.Address $.BackendControlPlanePort }} weight {{ $b.Weight }} check check-ssl verify none
    {{- end }}
---
EOF
  cat >>"$work/$wl.yaml" <<EOF
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: $wl
  namespace: default
spec:
  clusterNetwork:
    services:
      cidrBlocks: ["10.96.0.0/12"]
    pods:
      cidrBlocks: ["10.244.0.0/16"]
    serviceDomain: cluster.local
  controlPlaneRef:
    apiGroup: controlplane.cluster.x-k8s.io
    kind: KubeadmControlPlane
    name: $wl-cp
  infrastructureRef:
    apiGroup: infrastructure.cluster.x-k8s.io
    kind: DockerCluster
    name: $wl
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DockerCluster
metadata:
  name: $wl
  namespace: default
spec:
  loadBalancer:
    imageRepository: $KB_HAPROXY_REPOSITORY
    imageTag: $KB_HAPROXY_TAG
    customHAProxyConfigTemplateRef:
      name: kb-capd-haproxy
---
apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: KubeadmControlPlane
metadata:
  name: $wl-cp
  namespace: default
spec:
  replicas: 1
  version: $KB_KUBE_VERSION
  machineTemplate:
    spec:
      infrastructureRef:
        apiGroup: infrastructure.cluster.x-k8s.io
        kind: DockerMachineTemplate
        name: ${KB_CAPD_TEMPLATE:-$wl-cp}
  kubeadmConfigSpec:
    clusterConfiguration:
      apiServer:
        certSANs: [localhost, 127.0.0.1, 0.0.0.0]
    # CAPD runs kubeadm with the preflight errors a container node has
    # ignored already (adding "all" here makes kubeadm refuse the list).
    # fail-cgroupv1: the machines' kubelets start on a cgroup v1 host too
    # (Kubernetes v1.35 and later refuse one by default).
    initConfiguration:
      nodeRegistration:
        taints: []
        kubeletExtraArgs:
        - name: eviction-hard
          value: "nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%"
        - name: fail-cgroupv1
          value: "false"
    joinConfiguration:
      nodeRegistration:
        taints: []
        kubeletExtraArgs:
        - name: eviction-hard
          value: "nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%"
        - name: fail-cgroupv1
          value: "false"
---
EOF
  machine_template "$wl-cp" >>"$work/$wl.yaml"
  for _ in $(seq 1 30); do
    if mk "$c" apply -f - <"$work/$wl.yaml" >>"$work/$c-apply.log" 2>&1; then
      return 0
    fi
    sleep 4
  done
  die "applying workload cluster $wl into $c: $(tail -5 "$work/$c-apply.log")"
}

# machine_template NAME: the DockerMachineTemplate NAME of the workload
# clusters' control-plane machines (the bench's node image, the workload
# image preloaded).
machine_template() {
  cat <<EOF
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DockerMachineTemplate
metadata:
  name: $1
  namespace: default
spec:
  template:
    spec:
      customImage: $KB_NODE_IMAGE
      preLoadImages: [$KB_WORKLOAD_IMAGE]
EOF
}

# wl_retemplate MGMT CLUSTER: the change that makes KCP replace its
# machines, as an in-place update of the package applies it: a new
# DockerMachineTemplate CLUSTER-cp-v2 (templates are immutable, so a
# changed machine template is a new one) and KubeadmControlPlane
# CLUSTER-cp pointed at it.
wl_retemplate() {
  local c=$1 wl=$2
  machine_template "$wl-cp-v2" >"$work/template-v2.yaml"
  mk "$c" apply -f - <"$work/template-v2.yaml" >/dev/null || die "applying the new machine template"
  mk "$c" patch kcp "$wl-cp" --type merge -p "{\"spec\":{\"machineTemplate\":{\"spec\":{\"infrastructureRef\":{\"name\":\"$wl-cp-v2\"}}}}}" >/dev/null ||
    die "pointing the KubeadmControlPlane at the new template"
}

# wl_wait_available MGMT CLUSTER TIMEOUT_S: waits until Cluster CLUSTER is
# Available in MGMT.
wl_wait_available() {
  local c=$1 wl=$2 to=$3
  mk "$c" wait --for=condition=Available "cluster/$wl" --timeout="${to}s" >>"$work/$c-apply.log" 2>&1 || {
    mk "$c" get cluster,machine,kcp,dockercluster,dockermachine -o wide >&2 || true
    mk "$c" -n capd-system logs deployment/capd-controller-manager --tail=40 >&2 || true
    mk "$c" -n capi-kubeadm-control-plane-system logs deployment/capi-kubeadm-control-plane-controller-manager --tail=20 >&2 || true
    return 1
  }
}

# wl_up MGMT CLUSTER: applies workload cluster CLUSTER in MGMT, waits
# until it is Available (its time a number), and runs the bench workload
# in it; sets wl_node (its control-plane container) and wl_url (the
# workload's URL on the Docker network).
wl_up() {
  local c=$1 wl=$2 t
  t=$(now)
  wl_apply "$c" "$wl"
  wl_wait_available "$c" "$wl" 900 || die "workload cluster $wl is not Available in 900 s"
  result "$wl: Cluster Available after apply (s)" "$(secs "$t")"
  wl_node=$(wl_nodes "$wl" | head -1)
  [ -n "$wl_node" ] || die "no control-plane container of $wl"
  wk "$wl_node" wait --for=condition=Ready node --all --timeout=300s >/dev/null || die "$wl's node is not Ready"
  # shellcheck disable=SC2034 # read by the experiments
  wl_url=$(workload_deploy "$wl_node")
}

# workload_deploy NODE: the bench workload (two replicas, NodePort 30080)
# in the workload cluster whose control-plane container is NODE; prints
# the URL a client on the Docker network uses.
workload_deploy() {
  local n=$1 ip
  docker exec -i "$n" ctr -n k8s.io images import --all-platforms - <"$KB_BENCH_IMAGES/workload.tar" >/dev/null ||
    die "importing the workload image into $n"
  wk "$n" apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata:
  name: workload
  namespace: default
spec:
  replicas: 2
  selector: {matchLabels: {app: workload}}
  template:
    metadata: {labels: {app: workload}}
    spec:
      containers:
      - name: workload
        image: $KB_WORKLOAD_IMAGE
        imagePullPolicy: Never
        ports: [{containerPort: 8080}]
        readinessProbe: {httpGet: {path: /, port: 8080}, periodSeconds: 2}
---
apiVersion: v1
kind: Service
metadata:
  name: workload
  namespace: default
spec:
  type: NodePort
  # Each machine answers with its own pods only: the bench's bridge CNI
  # gives every node the same pod range, so no pod is reachable from
  # another node.
  externalTrafficPolicy: Local
  selector: {app: workload}
  ports: [{port: 80, targetPort: 8080, nodePort: 30080}]
EOF
  wk "$n" wait --for=condition=Available deployment/workload --timeout=300s >/dev/null || {
    wk "$n" get pods -A -o wide >&2 || true
    die "the workload in $n is not Available in 300 s"
  }
  ip=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}' "$n" | awk '{print $1}')
  # The Deployment is Available before kube-proxy has written the
  # NodePort's rules (the first run's first 4 requests failed).
  local i=0
  until curl -fsS -m 2 -o /dev/null "http://$ip:30080/" 2>/dev/null; do
    i=$((i + 1))
    [ "$i" -lt 60 ] || die "the workload's NodePort on $ip never answered"
    sleep 1
  done
  echo "http://$ip:30080/"
}

# loop_start URL FILE: a request loop against URL (one request every 0.2 s,
# 2 s timeout each), one line per request in FILE: "<epoch ms> ok|fail".
# URL @PATH: each request goes to the URL that file PATH holds then (a
# client that follows a switch).
declare -A loop_pids=()
loop_start() {
  local url=$1 f=$2
  : >"$f"
  (
    u=$url
    while [ ! -e "$f.stop" ]; do
      [ "${url#@}" = "$url" ] || u=$(cat "${url#@}")
      if curl -fsS -m 2 -o /dev/null "$u" 2>/dev/null; then
        echo "$(($(now) / 1000000)) ok" >>"$f"
      else
        echo "$(($(now) / 1000000)) fail" >>"$f"
      fi
      sleep 0.2
    done
  ) &
  loop_pids[$f]=$!
}
# loop_start_cluster CLUSTER FILE: the same loop against the workload of
# CAPD cluster CLUSTER wherever it runs: each request tries the running
# control-plane machines in turn (2 s each), as a load balancer with health
# checks in front of them would; it fails when none answers.
loop_start_cluster() {
  local wl=$1 f=$2
  : >"$f"
  (
    while [ ! -e "$f.stop" ]; do
      r=fail
      for ip in $(docker ps --filter "label=io.x-k8s.kind.cluster=$wl" --filter label=io.x-k8s.kind.role=control-plane \
        --format '{{.ID}}' | xargs -r docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}' 2>/dev/null); do
        if curl -fsS -m 2 -o /dev/null "http://$ip:30080/" 2>/dev/null; then
          r=ok
          break
        fi
      done
      echo "$(($(now) / 1000000)) $r" >>"$f"
      sleep 0.2
    done
  ) &
  loop_pids[$f]=$!
}
# loop_longest_outage FILE [FROM_MS]: the longest run of failed requests,
# in seconds (from the first failure to the next success).
loop_longest_outage() {
  awk -v from="${2:-0}" '$1 < from {next} $2 == "fail" && !start {start = $1} $2 == "ok" && start {d = $1 - start; if (d > max) max = d; start = 0} END {if (start) {d = $1 - start; if (d > max) max = d}; printf "%.1f\n", max / 1000}' "$1"
}
loop_stop() {
  local f=$1
  [ -n "${loop_pids[$f]:-}" ] || return 0
  touch "$f.stop"
  wait "${loop_pids[$f]}" 2>/dev/null || true
  unset "loop_pids[$f]"
  rm -f "$f.stop"
}
# loop_baseline FILE WHAT: after 10 s of the loop in FILE, refuses a loop
# that mostly fails (the bench must work before the step it measures; a
# failed request or two at a load average above 40 is the machine's) and
# prints the counts as the baseline.
loop_baseline() {
  local f=$1 what=$2 ok fail
  sleep 10
  read -r ok fail < <(loop_count "$f")
  if [ "$ok" = 0 ] || [ "$fail" -gt $((ok / 5)) ]; then die "request loop before $what: $ok ok, $fail failed"; fi
  result "loop before $what (ok failed)" "$ok $fail"
}
# loop_report FILE WHAT [FROM_MS]: the loop's counts and longest outage.
loop_report() {
  local ok fail
  read -r ok fail < <(loop_count "$1" "${3:-0}")
  result "loop $2 (ok failed)" "$ok $fail"
  result "loop $2: longest run of failures (s)" "$(loop_longest_outage "$1" "${3:-0}")"
}
now_ms() { echo $(($(now) / 1000000)); }

# mem_of PATTERN: the memory (MiB) of the running containers whose names
# match the extended regular expression PATTERN, added up.
mem_of() {
  docker stats --no-stream --format '{{.Name}} {{.MemUsage}}' | awk -v p="$1" '$1 ~ p {
    v = $2; m = 1
    if (v ~ /GiB$/) m = 1024; else if (v ~ /KiB$/) m = 1 / 1024; else if (v ~ /kB$/) m = 1 / 1048.576; else if (v ~ /MB$/) m = 1000000 / 1048576; else if (v ~ /GB$/) m = 1000000000 / 1048576
    gsub(/[A-Za-z]+$/, "", v); t += v * m} END {printf "%.0f\n", t}'
}
# mem_sampler_start PATTERN FILE: every 5 s, "<epoch ms> <MiB>" of mem_of
# PATTERN in FILE, until capd_end or mem_sampler_stop.
mem_sampler_start() {
  (while :; do echo "$(now_ms) $(mem_of "$1")" >>"$2"; sleep 5; done) &
  sampler_pid=$!
}
mem_sampler_stop() {
  [ -z "${sampler_pid:-}" ] || kill "$sampler_pid" 2>/dev/null || true
  sampler_pid=
}
# mem_peak FILE: the largest sample in FILE (MiB).
mem_peak() { awk '$2 > m {m = $2} END {printf "%d\n", m}' "$1"; }

# loop_count FILE [FROM_MS]: "<ok> <fail>" since FROM_MS.
loop_count() {
  awk -v from="${2:-0}" '$1 >= from {if ($2 == "ok") ok++; else fail++} END {printf "%d %d\n", ok, fail}' "$1"
}

# containers CLUSTER: "<name> <id> <started at> <restart count>" of every
# container of CAPD cluster CLUSTER (load balancer included).
containers() {
  local ids
  ids=$(docker ps -aq --filter "label=io.x-k8s.kind.cluster=$1")
  [ -n "$ids" ] || return 0
  # shellcheck disable=SC2086
  docker inspect -f '{{.Name}} {{printf "%.12s" .Id}} {{.State.Status}} {{.State.StartedAt}} {{.RestartCount}}' $ids | sed 's#^/##' | sort
}

# same_lines A B: how many containers of list A (containers' lines) are
# in list B with the same name, ID, state and start time.
same_lines() {
  comm -12 <(awk '{print $1, $2, $3, $4}' "$1" | sort) <(awk '{print $1, $2, $3, $4}' "$2" | sort) | wc -l
}

capd_cleanup() {
  local c ids
  for c in $(kind get clusters 2>/dev/null | grep '^kb-capd-' || true); do
    kind delete cluster --name "$c" --kubeconfig "$work/$c.kubeconfig" >/dev/null 2>&1 || true
  done
  ids=$(docker ps -aq --filter label=io.x-k8s.kind.cluster | while read -r id; do
    docker inspect -f '{{index .Config.Labels "io.x-k8s.kind.cluster"}} {{.Id}}' "$id"
  done | awk '$1 ~ /^kb-capd-/ {print $2}')
  if [ -n "$ids" ]; then
    # shellcheck disable=SC2086
    docker rm -f -v $ids >/dev/null 2>&1 || true
  fi
}

# load_line: the machine's load average now.
load_line() { cut -d' ' -f1-3 /proc/loadavg; }
