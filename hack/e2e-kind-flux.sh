# e2e-kind-flux.sh: Flux on the bench (issue 28, part 8), sourced by
# hack/e2e-kind.sh, which runs flux_part after the adopt part in `all` and
# alone as `hack/e2e-kind.sh flux`.
#
# Each slot's management cluster runs Flux's source-controller and
# kustomize-controller, built offline from hack/tools/flux
# (hack/flux/images.sh, cached by pin), loaded into the kind node, and
# reconciles the krops-shaped config artifact of the slot-names package
# (testdata/packages/krops/slot-names: the tree names its workload cluster
# ${WORKLOAD_CLUSTER_NAME:=local-workload} and its Kustomizations substitute
# from the optional ConfigMap kubectl-bundle-slot) from the slot's own
# registry, where slot create seeded it from the package's OCI layout, the
# signed bytes unchanged. The root OCIRepository and Kustomization are the
# package's own (its flux-instance.yaml, which the site applies with
# kubectl from an onDeploy action), pointed at the slot's registry over
# HTTP. Cluster API's CRDs (Cluster, DockerCluster,
# ClusterResourceSet from the modules hack/tools/capi pins) are applied
# without its controllers: the Cluster object is what is looked for.
#
#   1. slot a, created without the package (as a site that does not use
#      kubectl-bundle's names): no ConfigMap, Flux substitutes the default,
#      and the Cluster is local-workload;
#   2. slot b, created with --package: slot create writes the ConfigMap
#      (WORKLOAD_CLUSTER_NAME=local-workload-b) before Flux runs, and slot
#      b's Flux creates Cluster local-workload-b (its DockerCluster and
#      infrastructureRef too), from the same artifact digest as slot a's;
#      slot a's clusters are unchanged; every Kustomization is Ready;
#   3. slot a named afterwards: create a --package on the running slot
#      writes WORKLOAD_CLUSTER_NAME=local-workload-a; at its next reconcile
#      slot a's Flux creates Cluster local-workload-a and prunes
#      local-workload (a rename, which under a running Cluster API is the
#      deletion of the workload cluster).
#
# The names and the time Flux took (from the root objects' apply to the
# OCIRepository's artifact and to the Cluster object) go to $measure.
# Names, state dir and kubeconfig are the part's own (prefix kb-flux,
# registry kb-flux-registry, ports from the port base + 20).
# shellcheck shell=bash disable=SC2154,SC2034

flux_dir="$work/flux"
flux_pkg="$root/testdata/packages/krops/slot-names/zarf-package-krops-shaped-amd64-1.0.0.tar.zst"

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

# flux_install SLOT: the bench's Flux and Cluster API's CRDs in slot SLOT's
# management cluster, the controllers Available.
flux_install() {
  local s=$1 ctx=kind-kb-flux-$1 f
  check "kind load image-archive of the Flux images into kb-flux-$s" --both -- \
    kind load image-archive --name "kb-flux-$s" "$KB_FLUX_DIR/source-controller.tar" "$KB_FLUX_DIR/kustomize-controller.tar"
  check "applying the bench's Flux into slot $s" --both -- kubectl --context "$ctx" apply --server-side -f "$KB_FLUX_MANIFESTS"
  for f in "${flux_crds[@]}"; do
    check "applying $(basename "$f") into slot $s" --both -- kubectl --context "$ctx" apply --server-side -f "$f"
  done
  check "the CRDs in slot $s are not Established" --both -- \
    kubectl --context "$ctx" wait --for=condition=Established --timeout=120s \
    crd/ocirepositories.source.toolkit.fluxcd.io crd/kustomizations.kustomize.toolkit.fluxcd.io \
    crd/clusters.cluster.x-k8s.io crd/dockerclusters.infrastructure.cluster.x-k8s.io
  check "Flux's controllers in slot $s are not Available in 300 s" --both -- \
    kubectl --context "$ctx" -n flux-system wait --for=condition=Available --timeout=300s deploy/source-controller deploy/kustomize-controller
}

# flux_root SLOT: the fixture's root OCIRepository and Kustomization, the
# OCIRepository pointed at slot SLOT's registry (its address on the kind
# network; plain HTTP, so insecure).
flux_root() {
  local s=$1 ip
  ip=$(docker inspect -f '{{(index .NetworkSettings.Networks "kind").IPAddress}}' "kb-flux-registry-$s")
  sed -e "s#^\( *\)url: oci://.*#\1url: oci://$ip:5000/krops-config\n\1insecure: true#" "$flux_dir/flux-instance.yaml" >"$flux_dir/root-$s.yaml"
  grep -q "url: oci://$ip:5000/krops-config" "$flux_dir/root-$s.yaml" || fail "the fixture's OCIRepository has no url: line to point at slot $s's registry"
  kubectl --context "kind-kb-flux-$s" apply -f "$flux_dir/root-$s.yaml" >/dev/null
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
  local t t0 art rev_a rev_b
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

  # The package's OCI layout (its images/ directory, the signed bytes)
  # seeds each slot's registry with the artifact under krops-config:latest.
  tar --zstd -xf "$flux_pkg" -C "$flux_dir/layout" images components/flux-instance.tar
  tar -xOf "$flux_dir/layout/components/flux-instance.tar" flux-instance/files/0/flux-instance.yaml >"$flux_dir/flux-instance.yaml"
  art=$(jq -r '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] | endswith("/krops-config:latest")) | .digest' "$flux_dir/layout/images/index.json")
  [ -n "$art" ] || fail "the slot-names package holds no krops-config:latest"
  cat >"$flux_dir/state/config.yaml" <<EOF
kind: Config
workloadClusters: [local-workload]
seed:
  - {ref: krops-config:latest, path: $flux_dir/layout/images}
EOF

  # --- slot a: no ConfigMap, Flux's default ---
  kubectl-bundle-slot preflight a
  t=$(now)
  kubectl-bundle-slot create a
  m "flux: slot create a" "$t"
  check "slot a's registry was not seeded with the package's artifact" --has "seeded +krops-config:latest $art" -- kubectl-bundle-slot describe a
  t=$(now)
  flux_install a
  m "flux: Flux installed in a" "$t"
  t0=$(now)
  flux_root a
  flux_wait a "$t0"
  check "slot a's Cluster is not the default local-workload" --is local-workload -- flux_clusters a
  check "slot a has a ConfigMap kubectl-bundle-slot, written by no one" --rc nonzero --both -- \
    kubectl --context kind-kb-flux-a -n flux-system get configmap kubectl-bundle-slot
  check "slot a's OCIRepository" --has . -- kubectl --context kind-kb-flux-a -n flux-system get ocirepository krops-config -o jsonpath='{.status.artifact.revision}'
  rev_a=$checked
  [[ $rev_a == *"@$art" ]] || fail "slot a's Flux reconciled $rev_a, not the package's artifact $art"
  printf '%-28s %s (revision %s)\n' "flux a: Cluster" "$(flux_clusters a)" "$rev_a" | tee -a "$measure"

  # --- slot b: created with the package, its ConfigMap written by create ---
  # The package declares no Zarf variable SLOT (only its Flux names are the
  # slots' own), so preflight --blue-green may refuse it on that finding:
  # what is checked here is the name it says slot b gets.
  check "preflight b does not name slot b's Flux name" --rc any --both --has 'WORKLOAD_CLUSTER_NAME=local-workload-b' -- \
    kubectl-bundle-slot preflight b --package "$flux_pkg" --blue-green
  t=$(now)
  kubectl-bundle-slot create b --package "$flux_pkg"
  m "flux: slot create b --package" "$t"
  check "slot create b did not write WORKLOAD_CLUSTER_NAME=local-workload-b into flux-system/kubectl-bundle-slot" --is local-workload-b -- \
    kubectl --context kind-kb-flux-b -n flux-system get configmap kubectl-bundle-slot -o jsonpath='{.data.WORKLOAD_CLUSTER_NAME}'
  t=$(now)
  flux_install b
  m "flux: Flux installed in b" "$t"
  t0=$(now)
  flux_root b
  flux_wait b "$t0"
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
  echo "e2e-kind: Flux: slot a's Cluster local-workload, slot b's local-workload-b, both from $art"

  # --- slot a named afterwards: create a --package on the running slot ---
  # Create writes the names into a slot created without them ("before
  # the deploy that needs them"); here Flux has already created the
  # default's Cluster. kustomize-controller does not watch the ConfigMap:
  # the names apply at the next reconcile (asked for here, else at the
  # interval), and prune: true then deletes Cluster local-workload, which
  # under a running Cluster API deletes that workload cluster.
  check "create a --package on the ready slot a did not write its Flux names" --both \
    --has 'already created; the package.s Flux names written into it: flux-system/WORKLOAD_CLUSTER_NAME=local-workload-a' -- \
    kubectl-bundle-slot create a --package "$flux_pkg"
  check "slot a's ConfigMap does not say local-workload-a" --is local-workload-a -- \
    kubectl --context kind-kb-flux-a -n flux-system get configmap kubectl-bundle-slot -o jsonpath='{.data.WORKLOAD_CLUSTER_NAME}'
  t0=$(now)
  kubectl --context kind-kb-flux-a -n flux-system annotate --overwrite kustomization krops-config clusters cni \
    "reconcile.fluxcd.io/requestedAt=$(date +%s)" >/dev/null
  local end=$((SECONDS + 180))
  until [ "$(flux_clusters a 2>/dev/null)" = local-workload-a ] || [ "$SECONDS" -ge "$end" ]; do sleep 1; done
  check "slot a's Flux did not replace Cluster local-workload by local-workload-a in 3 minutes" --is local-workload-a -- flux_clusters a
  m "flux a: renamed by its ConfigMap" "$t0"
  printf '%-28s %s (local-workload pruned)\n' "flux a: Cluster, renamed" "$(flux_clusters a)" | tee -a "$measure"

  for s in b a; do
    t=$(now)
    kubectl-bundle-slot destroy "$s" --force --yes
    m "flux: slot destroy $s" "$t"
  done
  check "containers left after the Flux part" --lacks '^kb-flux-' -- docker ps -a --format '{{.Names}}'
}
