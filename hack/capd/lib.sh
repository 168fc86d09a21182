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
$KB_CAPI_DIR/capi-manager.tar $KB_CAPI_IMAGE_ID
$KB_CAPI_DIR/kubeadm-bootstrap-manager.tar $KB_CABPK_IMAGE_ID
$KB_CAPI_DIR/kubeadm-control-plane-manager.tar $KB_KCP_IMAGE_ID
$KB_CAPI_DIR/capd-manager.tar $KB_CAPD_IMAGE_ID
$KB_CAPI_DIR/haproxy.tar $KB_HAPROXY_IMAGE_ID
EOF
  for ref in "$KB_NODE_IMAGE" "$KB_WORKLOAD_IMAGE" "$KB_CAPI_IMAGE" "$KB_CABPK_IMAGE" "$KB_KCP_IMAGE" "$KB_CAPD_IMAGE" "$KB_HAPROXY_IMAGE"; do
    docker image inspect "$ref" >/dev/null 2>&1 || die "image $ref is not in the engine after loading its archive"
  done
  : >"$work/results.txt"
  say "node $KB_NODE_IMAGE, Cluster API $KB_CAPI_VERSION, CAPD $KB_CAPD_VERSION, load balancer $KB_HAPROXY_IMAGE"
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
# with the bench's Cluster API installed and Available.
mgmt_create() {
  local c=$1 t
  t=$(now)
  cat >"$work/$c-kind.yaml" <<EOF
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
- role: control-plane
  image: $KB_NODE_IMAGE
  extraMounts:
  - hostPath: $docker_sock
    containerPath: /var/run/docker.sock
EOF
  kind create cluster --name "$c" --config "$work/$c-kind.yaml" --kubeconfig "$work/$c.kubeconfig" --wait 3m >"$work/$c-kind.log" 2>&1 ||
    die "kind create cluster $c: $(tail -5 "$work/$c-kind.log")"
  result "$c: kind create (s)" "$(secs "$t")"
  t=$(now)
  kind load docker-image --name "$c" "$KB_CAPI_IMAGE" "$KB_CABPK_IMAGE" "$KB_KCP_IMAGE" "$KB_CAPD_IMAGE" >>"$work/$c-kind.log" 2>&1 ||
    die "kind load docker-image into $c: $(tail -5 "$work/$c-kind.log")"
  local m
  for m in core bootstrap-kubeadm control-plane-kubeadm infrastructure-docker; do
    mk "$c" apply --server-side --force-conflicts -f - <"$KB_CAPI_MANIFESTS/$m.yaml" >>"$work/$c-apply.log" 2>&1 ||
      die "applying $m into $c: $(tail -5 "$work/$c-apply.log")"
  done
  local ns
  for ns in capi-system capi-kubeadm-bootstrap-system capi-kubeadm-control-plane-system capd-system; do
    mk "$c" -n "$ns" wait --for=condition=Available deployment --all --timeout=300s >>"$work/$c-apply.log" 2>&1 || {
      mk "$c" -n "$ns" get pods -o wide >&2 || true
      mk "$c" -n "$ns" logs deployment --all-containers --tail=30 >&2 || true
      die "the providers in $ns of $c are not Available in 300 s"
    }
  done
  result "$c: Cluster API installed and Available (s)" "$(secs "$t")"
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
    initConfiguration:
      nodeRegistration:
        taints: []
        kubeletExtraArgs:
        - name: eviction-hard
          value: "nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%"
    joinConfiguration:
      nodeRegistration:
        taints: []
        kubeletExtraArgs:
        - name: eviction-hard
          value: "nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%"
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DockerMachineTemplate
metadata:
  name: $wl-cp
  namespace: default
spec:
  template:
    spec:
      customImage: $KB_NODE_IMAGE
      preLoadImages: [$KB_WORKLOAD_IMAGE]
EOF
  for _ in $(seq 1 30); do
    if mk "$c" apply -f - <"$work/$wl.yaml" >>"$work/$c-apply.log" 2>&1; then
      return 0
    fi
    sleep 4
  done
  die "applying workload cluster $wl into $c: $(tail -5 "$work/$c-apply.log")"
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
loop_start() {
  local url=$1 f=$2
  : >"$f"
  (
    while [ ! -e "$f.stop" ]; do
      if curl -fsS -m 2 -o /dev/null "$url" 2>/dev/null; then
        echo "$(($(now) / 1000000)) ok" >>"$f"
      else
        echo "$(($(now) / 1000000)) fail" >>"$f"
      fi
      sleep 0.2
    done
  ) &
  loop_pid=$!
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
  loop_pid=$!
}
# loop_longest_outage FILE [FROM_MS]: the longest run of failed requests,
# in seconds (from the first failure to the next success).
loop_longest_outage() {
  awk -v from="${2:-0}" '$1 < from {next} $2 == "fail" && !start {start = $1} $2 == "ok" && start {d = $1 - start; if (d > max) max = d; start = 0} END {if (start) {d = $1 - start; if (d > max) max = d}; printf "%.1f\n", max / 1000}' "$1"
}
loop_stop() {
  touch "$1.stop"
  [ -z "${loop_pid:-}" ] || wait "$loop_pid" 2>/dev/null || true
  loop_pid=
  rm -f "$1.stop"
}
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
