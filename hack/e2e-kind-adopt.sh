# e2e-kind-adopt.sh: kubectl-bundle-slot adopt on real parts (sourced by
# hack/e2e-kind.sh, which runs adopt_part after the core in `all`, and alone
# as `hack/e2e-kind.sh adopt`).
#
# A site is built the way offline-run.sh builds it with
# stage-and-create-cluster.sh: `docker load` of the archives, `kind create
# cluster` (the kind CLI, built from the kind module the project pins) with
# the Docker socket mounted, a registry container on the kind network
# publishing 127.0.0.1:<port>, then the real zarf: `zarf package verify`,
# `zarf init`, `zarf package deploy` of a signed 0.1.0 package that names
# everything once (no SLOT variable), so zarf writes its own deployed-package
# record with the digest. Two differences, both forced by what can be built
# here: zarf init points zarf at the site's registry container
# (--registry-mode=external) instead of zarf's own registry on NodePort
# 31999, whose injector and images cannot be built offline, so the node's
# containerd mirrors 127.0.0.1:<port> to that container; and the CAPD
# workload cluster is a stand-in container named as CAPD names its load
# balancer (<workload>-lb), since Cluster API is not built here.
#
# Then: adopt (nothing on the daemon changes), the gate, blue-green.sh apply
# of 0.2.0 (declares SLOT) into slot b, revert (the adopted slot gated and
# active again), apply again, accept (the site's cluster, registry and
# workload containers retired; the alias context kept, on slot b).
#
# The site's names are the bench's own (E2E_SITE_CLUSTER, default kb-adopt;
# E2E_SITE_REGISTRY, kb-adopt-registry; E2E_SITE_PORT, the port base + 10;
# E2E_SITE_WORKLOAD, kb-adopt-wl) so that a real site on the same engine is
# never touched: the part refuses to start when any of them is taken, and
# adopt and the config name them the way an operator names airgap-mgmt,
# krops-registry-airgap and 5002. State dir, config and kubeconfig are the
# part's own.
# shellcheck shell=bash disable=SC2154,SC2034

site_cluster=${E2E_SITE_CLUSTER:-kb-adopt}
site_registry=${E2E_SITE_REGISTRY:-kb-adopt-registry}
site_port=${E2E_SITE_PORT:-$((port + 10))}
site_wl=${E2E_SITE_WORKLOAD:-kb-adopt-wl}
site_dir="$work/adopt"

# adopt_env points the plugins at the part's state dir (its config.yaml
# names the site) and kubeconfig, and drops the core's name settings.
adopt_env() {
  export KUBECTL_BUNDLE_STATE_DIR="$site_dir/state" KUBECONFIG="$site_dir/kubeconfig"
  unset KUBECTL_BUNDLE_CLUSTER_PREFIX KUBECTL_BUNDLE_REGISTRY_NAME KUBECTL_BUNDLE_REGISTRY_PORT_BASE KUBECTL_BUNDLE_REGISTRY_ALIAS
  PATH="$site_dir/bin:$PATH"
}

# daemon_state prints what runs on the Docker daemon: containers (state,
# start time, restarts, networks and aliases), networks, kind clusters.
daemon_state() {
  # shellcheck disable=SC2016 # a Go template, not a shell expansion
  docker ps -aq --no-trunc | xargs -r docker inspect --format \
    '{{.Name}} {{.Id}} {{.Config.Image}} {{.State.Status}} {{.State.StartedAt}} {{.RestartCount}} {{range $n, $e := .NetworkSettings.Networks}}{{$n}}={{$e.IPAddress}}{{json $e.Aliases}} {{end}}{{json .HostConfig.PortBindings}}' | sort
  docker network ls --no-trunc --format '{{.ID}} {{.Name}} {{.Driver}}' | sort
  kind get clusters 2>&1
}

# site_names_taken prints the site's names that the daemon already has.
site_names_taken() {
  docker ps -a --format '{{.Names}}' | grep -x -e "$site_registry" -e "$site_cluster-control-plane" -e "$site_wl-lb" -e "$site_cluster-b-control-plane" -e "$site_registry-b" || true
  if (: </dev/tcp/127.0.0.1/"$site_port") 2>/dev/null; then echo "127.0.0.1:$site_port"; fi
  if (: </dev/tcp/127.0.0.1/"$((site_port + 1))") 2>/dev/null; then echo "127.0.0.1:$((site_port + 1))"; fi
}

# adopt_cleanup RC removes what the part built (it refused to start where
# any of the names was taken, so these are its own), also on failure.
adopt_cleanup() {
  [ -d "$site_dir" ] || return 0
  (
    adopt_env
    if [ "$1" != 0 ]; then
      for c in "kind-$site_cluster-a" "kind-$site_cluster-b"; do
        echo "--- pods through $c" >&2
        kubectl --context "$c" get pods -A -o wide 2>&1 | tail -20 >&2 || true
      done
      kubectl-bundle-journal status >"$site_dir/status" 2>&1 || true
      head -5 "$site_dir/status" >&2
    fi
    for s in b a; do kubectl-bundle-slot destroy "$s" --force --yes >/dev/null 2>&1 || true; done
    docker ps -aq --filter "label=io.x-k8s.kind.cluster=$site_cluster" | xargs -r docker rm -f >/dev/null 2>&1 || true
    docker rm -f "$site_registry" "$site_wl-lb" >/dev/null 2>&1 || true
  ) || true
}

adopt_part() (
  check "the adopt part's names are taken on this daemon (set E2E_SITE_CLUSTER, E2E_SITE_REGISTRY, E2E_SITE_PORT)" --is '' -- site_names_taken
  mkdir -p "$site_dir/bin"
  mkdir -m 0700 "$site_dir/state"
  adopt_env
  alias_ctx=kind-$site_cluster registry_alias=$site_cluster-krops-registry node_prefix=$site_cluster
  # The site's names, as an operator writes airgap-mgmt's in config.yaml.
  cat >"$site_dir/state/config.yaml" <<EOF
kind: Config
clusterPrefix: $site_cluster
registryName: $site_registry
registryPortBase: $site_port
workloadClusters: [$site_wl]
registryAlias: $registry_alias
EOF

  t=$(now)
  check "building the kind CLI from the pinned module" --both -- go -C "$root" build -o "$site_dir/bin/kind" sigs.k8s.io/kind
  pkg01=$(make_pkg 0.1.0 "$(workload_image 0.1.0)" krops-airgap fixed)
  pkg02=$(make_pkg 0.2.0 "$(workload_image 0.2.0)" krops-airgap)
  m "adopt: kind CLI + packages" "$t"

  # The site, as stage-and-create-cluster.sh and offline-run.sh build it.
  t=$(now)
  for a in "$KUBECTL_BUNDLE_ARCHIVES"/*.tar; do docker load -i "$a" >/dev/null; done
  kind create cluster --name "$site_cluster" --image "$KB_NODE_IMAGE" --config - <<EOF
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
kubeadmConfigPatches:
  - |
    apiVersion: kubelet.config.k8s.io/v1beta1
    kind: KubeletConfiguration
    failCgroupV1: false
containerdConfigPatches:
  - |-
    [plugins."io.containerd.grpc.v1.cri".registry.mirrors."127.0.0.1:$site_port"]
      endpoint = ["http://$site_registry:5000"]
nodes:
  - role: control-plane
    extraMounts:
      - hostPath: ${KUBECTL_BUNDLE_DOCKER_SOCKET:-/var/run/docker.sock}
        containerPath: /var/run/docker.sock
EOF
  kubectl config use-context "kind-$site_cluster" >/dev/null
  kubectl wait --for=condition=Ready node --all --timeout=180s >/dev/null
  docker run -d --name "$site_registry" --network kind -p "127.0.0.1:$site_port:5000" \
    --label dev.kubectl-bundle.e2e=1 "$KB_REGISTRY_IMAGE" >/dev/null
  check "the site's registry does not answer on 127.0.0.1:$site_port" -- \
    curl -fsS --retry 15 --retry-all-errors --retry-delay 1 "http://127.0.0.1:$site_port/v2/"
  docker run -d --name "$site_wl-lb" --network kind --label dev.kubectl-bundle.e2e=1 "$KB_REGISTRY_IMAGE" >/dev/null
  m "adopt: site kind + registry" "$t"
  t=$(now)
  check "zarf package verify" --both -- zarf package verify "$pkg01" --key "$key" --no-color
  check "zarf init" --both -- zarf init "$(ls "$KUBECTL_BUNDLE_ARCHIVES"/zarf-init-*.tar.zst)" --registry-mode=external \
    --registry-url="127.0.0.1:$site_port" --registry-push-username=site --registry-push-password=site \
    --components= --confirm --no-color
  check "zarf package deploy" --both -- zarf package deploy "$pkg01" --confirm --no-color
  m "adopt: site zarf init+deploy" "$t"
  check "the site does not run 0.1.0" --is 0.1.0 -- kubectl -n bench get deploy workload -o jsonpath='{.metadata.labels.version}'
  # zarf_record: zarf's deployed-package record of krops-airgap.
  # shellcheck disable=SC2317 # called through check
  zarf_record() { kubectl -n zarf get secret zarf-package-krops-airgap -o jsonpath='{.data.data}' | base64 -d; }
  check "zarf recorded no digest for krops-airgap" --has '"digest":"sha256:[0-9a-f]{64}"' -- zarf_record
  recorded=$(grep -o '"digest":"sha256:[0-9a-f]\{64\}"' <<<"$checked" | grep -o 'sha256:[0-9a-f]*')
  echo "e2e-kind: the site runs krops-airgap 0.1.0; zarf recorded $recorded"

  # adopt: slot a, active, and nothing on the daemon or in the cluster changed.
  daemon_state >"$site_dir/before"
  rv_before=$(kubectl -n zarf get secret zarf-package-krops-airgap -o jsonpath='{.metadata.resourceVersion}')
  t=$(now)
  check "slot adopt a failed, or its report does not name the site and the digest zarf recorded ($recorded)" \
    --line "slot a adopted and active: kind cluster $site_cluster (context kind-$site_cluster-a), registry $site_registry on 127.0.0.1:$site_port, workload clusters $site_wl" \
    --has "zarf digest $recorded \(as recorded in zarf/zarf-package-krops-airgap\)" -- \
    kubectl bundle-slot adopt a --package "$pkg01" --key "$key" --cluster "$site_cluster" --registry "$site_registry" \
    --registry-port "$site_port" --workload-clusters "$site_wl"
  m "slot adopt a" "$t"
  echo "$checked"
  daemon_state >"$site_dir/after"
  check "adopt changed the Docker daemon" -- diff "$site_dir/before" "$site_dir/after"
  check "adopt changed zarf's record in the site's cluster" --is "$rv_before" -- \
    kubectl -n zarf get secret zarf-package-krops-airgap -o jsonpath='{.metadata.resourceVersion}'
  check "slot a is not the active slot after adopt" --is a -- cat "$KUBECTL_BUNDLE_STATE_DIR/active"
  check "slot a's own context kind-$site_cluster-a does not reach the site" --is "$site_cluster-control-plane" -- \
    kubectl --context "kind-$site_cluster-a" get nodes -o jsonpath='{.items[0].metadata.name}'
  check "the alias context $alias_ctx does not reach the site after adopt" --is "$site_cluster-control-plane" -- alias_node
  check "adopt with slot a active does not refuse (exit 4)" --rc 4 -- \
    kubectl bundle-slot adopt a --package "$pkg01" --key "$key" --cluster "$site_cluster" --registry "$site_registry" \
    --registry-port "$site_port" --workload-clusters "$site_wl"
  t=$(now)
  kubectl-bundle-gate --slot a -f "$gate" --timeout 3m --record
  m "adopt: gate a (the site)" "$t"

  # blue-green next to the site: slot b's names collide with nothing.
  check "preflight b fails, or does not check slot b's names" \
    --has "cluster $site_cluster-b, registry $site_registry-b and workload clusters $site_wl-b are free" -- kubectl-bundle-slot preflight b
  with_outage adopt-apply "adopt: blue-green apply (b)" "$root/scripts/blue-green.sh" apply "$pkg02" --key "$key" --gate "$gate" --gate-timeout 5m
  expect_active b 0.2.0
  check "the SLOT variable did not reach slot b's pods" --is b -- \
    kubectl --context "kind-$site_cluster-b" -n bench get pods -l app=workload -o jsonpath='{.items[0].metadata.labels.slot}'
  check "the site (slot a) does not run 0.1.0 through the soak" --is 0.1.0 -- \
    kubectl --context "kind-$site_cluster-a" -n bench get deploy workload -o jsonpath='{.metadata.labels.version}'
  check "slot b's registry does not publish 127.0.0.1:$((site_port + 1))" --has "127\.0\.0\.1:$((site_port + 1))->5000/tcp" -- \
    docker ps --filter "name=^$site_registry-b$" --format '{{.Ports}}'
  with_outage adopt-revert "adopt: blue-green revert" "$root/scripts/blue-green.sh" revert --yes
  expect_active a 0.1.0 "$site_cluster-control-plane"
  check "slot b's containers are left after revert" --lacks "^$site_cluster-b-|^$site_registry-b\$" -- docker ps -a --format '{{.Names}}'
  t=$(now)
  "$root/scripts/blue-green.sh" apply "$pkg02" --key "$key" --gate "$gate" --gate-timeout 5m
  m "adopt: blue-green apply again" "$t"
  expect_active b 0.2.0
  t=$(now)
  "$root/scripts/blue-green.sh" accept --yes
  m "adopt: blue-green accept" "$t"
  expect_active b 0.2.0
  check "accept left the site's containers" --lacks "^($site_cluster-control-plane|$site_registry|$site_wl-lb)\$" -- docker ps -a --format '{{.Names}}'
  check "accept left kind cluster $site_cluster" --rc any --lacks "^$site_cluster\$" -- kind get clusters
  check "accept removed the alias context kind-$site_cluster, or left slot a's context kind-$site_cluster-a" \
    --line "kind-$site_cluster" --lacks "^kind-$site_cluster-a\$" -- kubectl config get-contexts -o name
  check "journal status fails after accept" -- kubectl-bundle-journal status
  head -3 <<<"$checked"
  check "slot b fails its gate after accept" -- kubectl-bundle-gate --slot b -f "$gate" --once

  t=$(now)
  kubectl-bundle-slot destroy b --force --yes
  m "adopt: slot destroy b" "$t"
  check "containers left after destroy" --lacks "^$site_cluster-|^$site_registry" -- docker ps -a --format '{{.Names}}'
  echo "e2e-kind: adopt: PASS"
)
