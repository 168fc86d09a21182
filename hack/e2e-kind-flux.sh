# e2e-kind-flux.sh: Flux on the bench (issue 28, part 8), sourced by
# hack/e2e-kind.sh, which runs flux_part after the adopt part in `all` and
# alone as `hack/e2e-kind.sh flux`.
#
# blue-green.sh apply of a package shaped as the site's, Flux in it.
# hack/gen-krops-testdata.sh bench builds it from the slot-names package
# (its config tree names the workload cluster
# ${WORKLOAD_CLUSTER_NAME:=local-workload}; every Kustomization substitutes
# from the optional ConfigMap kubectl-bundle-slot), adding the bench's Flux
# (source-controller and kustomize-controller, built offline from
# hack/tools/flux by hack/flux/images.sh, cached by pin) and Cluster API's
# CRDs (Cluster, DockerCluster, ClusterResourceSet, from the modules
# hack/tools/capi pins; no controllers: the Cluster object is what is looked
# for). The config artifact is among its images, and the root OCIRepository
# and Kustomization are applied by an onDeploy action with kubectl, outside
# zarf's record. zarf pushes the artifact into the slot's registry; the
# OCIRepository names that registry by the in-cluster name slot create gives
# it (zarf-docker-registry.zarf, as zarf's own registry is named), labelled
# so that zarf's agent leaves it (it would point it at 127.0.0.1:PORT).
#
#   1. slot a, the first install by hand, created without the package (as
#      a site that does not use the tool's names): no ConfigMap, Flux
#      substitutes the default, and the Cluster is local-workload;
#   2. blue-green.sh apply of the next version: it says which name slot b
#      gets; slot create b --package writes the ConfigMap
#      (WORKLOAD_CLUSTER_NAME=local-workload-b) before the deploy; slot b's
#      Flux, deployed by the package, creates Cluster local-workload-b (its
#      DockerCluster and infrastructureRef too) from the same artifact
#      digest as slot a's; the gate (every Kustomization Ready, every image
#      from the slot's registry) passes and the switch makes b active;
#      slot a's Cluster is unchanged;
#   3. accept refuses to retire slot a while its workload cluster (made
#      before the slots had names of their own) would outlive it; deleted
#      through slot a's management cluster, as the refusal says, accept
#      retires slot a.
#
# The names and the time Flux took go to $measure. Names, state dir and
# kubeconfig are the part's own (prefix kb-flux, registry kb-flux-registry,
# ports from the port base + 20).
# shellcheck shell=bash disable=SC2154,SC2034

flux_dir="$work/flux"

# flux_names points the plugins at the part's state dir and names.
flux_names() {
  export KUBECTL_BUNDLE_STATE_DIR="$flux_dir/state" KUBECONFIG="$flux_dir/kubeconfig"
  export KUBECTL_BUNDLE_CLUSTER_PREFIX=kb-flux KUBECTL_BUNDLE_REGISTRY_NAME=kb-flux-registry
  export KUBECTL_BUNDLE_REGISTRY_PORT_BASE=$((port + 20)) KUBECTL_BUNDLE_REGISTRY_ALIAS=kb-flux-registry
}

# flux_cleanup RC removes the part's slots, also on failure.
flux_cleanup() {
  [ -d "$flux_dir/state" ] || return 0
  (
    flux_names
    if [ "$1" != 0 ]; then
      for s in a b; do
        echo "--- Flux in slot $s" >&2
        kubectl --context "kind-kb-flux-$s" get pods,ocirepositories,kustomizations -A 2>&1 | tail -20 >&2 || true
        kubectl --context "kind-kb-flux-$s" -n flux-system logs deploy/kustomize-controller --tail=20 2>&1 >&2 || true
      done
    fi
    for s in b a; do kubectl-bundle-slot destroy "$s" --force --yes >/dev/null 2>&1 || true; done
    docker ps -aq --filter name=^kb-flux- | xargs -r docker rm -f >/dev/null 2>&1 || true
  ) || true
}

# flux_clusters SLOT: the Cluster objects of slot SLOT, one name a line.
flux_clusters() {
  kubectl --context "kind-kb-flux-$1" get clusters.cluster.x-k8s.io -A -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'
}

# flux_wait SLOT START: waits up to 5 minutes for slot SLOT's OCIRepository
# to hold the artifact and for a Cluster object, recording both times.
flux_wait() {
  local s=$1 t0=$2 ctx=kind-kb-flux-$1 rev='' names='' end=$((SECONDS + 300))
  while :; do
    if [ -z "$rev" ]; then
      rev=$(kubectl --context "$ctx" -n flux-system get ocirepository krops-config -o jsonpath='{.status.artifact.revision}' 2>/dev/null || true)
      [ -z "$rev" ] || m "flux $s: artifact fetched" "$t0"
    fi
    names=$(flux_clusters "$s" 2>/dev/null || true)
    if [ -n "$names" ]; then
      m "flux $s: Cluster created" "$t0"
      break
    fi
    [ "$SECONDS" -lt "$end" ] || break
    sleep 1
  done
  check "slot $s's OCIRepository holds no artifact after 5 minutes" --has . -- \
    kubectl --context "$ctx" -n flux-system get ocirepository krops-config -o jsonpath='{.status.artifact.revision}'
  check "slot $s's Flux created no Cluster in 5 minutes" --has . -- flux_clusters "$s"
  # Every Kustomization Ready: the clusters one's healthChecks name the
  # Cluster as the root substituted it, and cni waits for it (dependsOn).
  check "slot $s's Kustomizations are not all Ready in 3 minutes" --both -- \
    kubectl --context "$ctx" -n flux-system wait --for=condition=Ready --timeout=180s kustomization/krops-config kustomization/clusters kustomization/cni
  m "flux $s: Kustomizations Ready" "$t0"
}

flux_part() {
  local t t0 art rev_a rev_b pkg1 pkg2 gate_flux key="$root/testdata/keys/cosign.pub"
  flux_names
  mkdir -p "$flux_dir/layout" "$flux_dir/state"
  chmod 0700 "$flux_dir/state"
  t=$(now)
  flux_env_file=$("$root/hack/lowcpu.sh" "$root/hack/flux/images.sh")
  # shellcheck disable=SC1090
  . "$flux_env_file"
  m "flux images" "$t"
  printf '%-28s %s %s MB, %s %s MB\n' "flux image sizes" "$KB_FLUX_SOURCE_IMAGE" $((KB_FLUX_SOURCE_IMAGE_SIZE / 1000000)) \
    "$KB_FLUX_KUSTOMIZE_IMAGE" $((KB_FLUX_KUSTOMIZE_IMAGE_SIZE / 1000000)) | tee -a "$measure"
  check "the tools module hack/tools/capi does not name Cluster API's modules in the module cache" -- \
    go -C "$root/hack/tools/capi" list -m -f '{{.Path}}={{.Dir}}' sigs.k8s.io/cluster-api sigs.k8s.io/cluster-api/test
  local capi capd
  capi=$(awk -F= '$1 == "sigs.k8s.io/cluster-api" {print $2}' <<<"$checked")
  capd=$(awk -F= '$1 == "sigs.k8s.io/cluster-api/test" {print $2}' <<<"$checked")/infrastructure/docker
  flux_crds=("$capi/core/config/crd/bases/cluster.x-k8s.io_clusters.yaml"
    "$capi/core/config/crd/bases/addons.cluster.x-k8s.io_clusterresourcesets.yaml"
    "$capd/config/crd/bases/infrastructure.cluster.x-k8s.io_dockerclusters.yaml")
  for f in "${flux_crds[@]}"; do [ -f "$f" ] || fail "Cluster API's CRD $f is missing (cd hack/tools/capi && go mod download)"; done

  # The two versions of the package, Flux in it; the same artifact.
  t=$(now)
  for v in 1.0.0 2.0.0; do
    check "building the bench's krops-shaped package $v" --both -- \
      env ZARF="$(command -v zarf)" "$root/hack/gen-krops-testdata.sh" bench "$flux_dir" "$v" "$flux_env_file" "${flux_crds[@]}"
  done
  pkg1=$flux_dir/zarf-package-krops-bench-amd64-1.0.0.tar.zst pkg2=$flux_dir/zarf-package-krops-bench-amd64-2.0.0.tar.zst
  m "flux: zarf package create x2" "$t"
  tar --zstd -xf "$pkg2" -C "$flux_dir/layout" images
  art=$(jq -r '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] | endswith("/krops-config:latest")) | .digest' "$flux_dir/layout/images/index.json")
  [ -n "$art" ] || fail "the bench package holds no krops-config:latest"
  # slotVariable optional: the package declares no Zarf variable SLOT; its
  # only names on the shared daemon are its Flux names, the slots' own.
  printf 'kind: Config\nworkloadClusters: [local-workload]\nslotVariable: optional\n' >"$flux_dir/state/config.yaml"
  # The gate: what Flux made is Ready (the clusters Kustomization's health
  # check names the slot's Cluster), every image from the slot's registry.
  gate_flux=$flux_dir/gate.yaml
  {
    printf 'apiVersion: kubectl-bundle.dev/v1alpha1\nkind: Gate\nmetadata:\n  name: bench-flux\nspec:\n  pollInterval: 2s\n  checks:\n'
    printf '  - name: images\n    images:\n      allowedRegistries: ["@slot"]\n      ignore: [registry.k8s.io/*]\n'
    printf '  - name: flux-source\n    resource: {apiVersion: source.toolkit.fluxcd.io/v1, kind: OCIRepository, namespace: flux-system, name: krops-config, condition: Ready}\n'
    for k in krops-config clusters cni; do
      printf '  - name: flux-%s\n    resource: {apiVersion: kustomize.toolkit.fluxcd.io/v1, kind: Kustomization, namespace: flux-system, name: %s, condition: Ready}\n' "$k" "$k"
    done
    printf '  - name: zarf-packages\n    zarf: {}\n'
  } >"$gate_flux"

  # --- slot a: the first install by hand, no ConfigMap: Flux's default ---
  kubectl-bundle-slot preflight a
  t=$(now)
  kubectl-bundle-slot create a
  m "flux: slot create a" "$t"
  check "slot a's registry has no in-cluster name (Service zarf/zarf-docker-registry on kb-flux-registry-a's address)" \
    --is "$(docker inspect -f '{{(index .NetworkSettings.Networks "kind").IPAddress}}' kb-flux-registry-a)" -- \
    kubectl --context kind-kb-flux-a -n zarf get endpointslice zarf-docker-registry -o jsonpath='{.endpoints[0].addresses[0]}'
  t=$(now)
  check "kubectl-bundle-verify --stage of the bench package 1.0.0" -- kubectl-bundle-verify "$pkg1" --key "$key" --stage
  kubectl-bundle-slot deploy a "$pkg1" --key "$key"
  m "flux: slot deploy a" "$t"
  t0=$(now)
  flux_wait a "$t0"
  check "slot a's Cluster is not the default local-workload" --is local-workload -- flux_clusters a
  check "slot a has a ConfigMap kubectl-bundle-slot, written by no one" --rc nonzero --both -- \
    kubectl --context kind-kb-flux-a -n flux-system get configmap kubectl-bundle-slot
  # The package's OCIRepository names the registry by its in-cluster name,
  # which source-controller's pod reaches, and zarf's agent left it so.
  check "slot a's OCIRepository is not zarf-docker-registry.zarf.svc.cluster.local:5000/krops-config" \
    --has '^oci://zarf-docker-registry\.zarf\.svc\.cluster\.local:5000/krops-config$' -- \
    kubectl --context kind-kb-flux-a -n flux-system get ocirepository krops-config -o jsonpath='{.spec.url}'
  check "slot a's OCIRepository" --has . -- kubectl --context kind-kb-flux-a -n flux-system get ocirepository krops-config -o jsonpath='{.status.artifact.revision}'
  rev_a=$checked
  [[ $rev_a == *"@$art" ]] || fail "slot a's Flux reconciled $rev_a, not the package's artifact $art"
  printf '%-28s %s (revision %s)\n' "flux a: Cluster" "$(flux_clusters a)" "$rev_a" | tee -a "$measure"
  t=$(now)
  kubectl-bundle-gate --slot a -f "$gate_flux" --timeout 5m --record
  m "flux: gate a" "$t"
  kubectl-bundle-switch to a

  # --- blue-green.sh apply: slot b with names of its own ---
  t=$(now)
  check "blue-green apply of the bench package 2.0.0 did not say which name slot b gets" --both \
    --has 'WORKLOAD_CLUSTER_NAME=local-workload-b' -- \
    "$root/scripts/blue-green.sh" apply "$pkg2" --key "$key" --gate "$gate_flux" --gate-timeout 5m
  m "flux: blue-green apply (b)" "$t"
  awk '/WORKLOAD_CLUSTER_NAME/ && n++ < 3 { print "flux apply: " $0 }' <<<"$checked" | tee -a "$measure"
  check "slot b is not active after the apply" --is b -- kubectl-bundle-switch status -o jsonpath='{.active}'
  check "slot create b did not write WORKLOAD_CLUSTER_NAME=local-workload-b into flux-system/kubectl-bundle-slot" --is local-workload-b -- \
    kubectl --context kind-kb-flux-b -n flux-system get configmap kubectl-bundle-slot -o jsonpath='{.data.WORKLOAD_CLUSTER_NAME}'
  check "slot b's Cluster is not local-workload-b" --is local-workload-b -- flux_clusters b
  check "slot b's DockerCluster is not local-workload-b" --is local-workload-b -- \
    kubectl --context kind-kb-flux-b -n default get dockerclusters.infrastructure.cluster.x-k8s.io -o jsonpath='{.items[*].metadata.name}'
  check "slot b's Cluster does not refer to its DockerCluster local-workload-b" --is local-workload-b -- \
    kubectl --context kind-kb-flux-b -n default get clusters.cluster.x-k8s.io local-workload-b -o jsonpath='{.spec.infrastructureRef.name}'
  check "slot b's OCIRepository" --has . -- kubectl --context kind-kb-flux-b -n flux-system get ocirepository krops-config -o jsonpath='{.status.artifact.revision}'
  rev_b=$checked
  [ "$rev_b" = "$rev_a" ] || fail "slot b's Flux reconciled $rev_b, slot a's $rev_a: not the same artifact"
  check "slot a's Cluster changed once slot b's Flux ran" --is local-workload -- flux_clusters a
  printf '%-28s %s (revision %s)\n' "flux b: Cluster" "$(flux_clusters b)" "$rev_b" | tee -a "$measure"
  for s in a b; do
    kubectl --context "kind-kb-flux-$s" -n flux-system get kustomizations \
      -o jsonpath='{range .items[*]}{.metadata.name}{" Ready="}{.status.conditions[?(@.type=="Ready")].status}{" "}{.status.conditions[?(@.type=="Ready")].reason}{"\n"}{end}' |
      sed "s/^/flux $s: Kustomization /" | tee -a "$measure"
  done
  echo "e2e-kind: Flux: slot a's Cluster local-workload, slot b's local-workload-b, both from $art; b active"

  # Accept retires slot a, whose workload cluster (local-workload, made
  # before the slots had names of their own) its destroy would leave
  # running: refused, naming it, nothing changed. Its advice, as printed:
  # delete it through slot a's management cluster, then accept again.
  check "accept did not refuse to retire slot a while its Cluster local-workload is not named in workloadClusters" \
    --rc 3 --both --has 'workload clusters that config.yaml.s workloadClusters does not name: local-workload' -- \
    "$root/scripts/blue-green.sh" accept --yes
  check "slot a is gone after a refused accept" --has . -- kubectl --context kind-kb-flux-a get nodes -o name
  kubectl --context kind-kb-flux-a delete cluster.cluster.x-k8s.io local-workload -n default
  t=$(now)
  "$root/scripts/blue-green.sh" accept --yes
  m "flux: blue-green accept" "$t"
  check "slot a's containers are left after accept" --lacks '^kb-flux-a-|^kb-flux-registry-a$' -- docker ps -a --format '{{.Names}}'
  t=$(now)
  kubectl-bundle-slot destroy b --force --yes
  m "flux: slot destroy b" "$t"
  check "containers left after the Flux part" --lacks '^kb-flux-' -- docker ps -a --format '{{.Names}}'
}
