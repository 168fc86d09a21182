#!/usr/bin/env bash
# images.sh: the bench's Flux (source-controller and kustomize-controller),
# built offline from the modules pinned in hack/tools/flux, saved as
# docker-save archives and cached by the hash of its pins outside the
# clone, beside the node image's (hack/images/build.sh):
#
#   $CACHE/flux/<hash>/source-controller.tar     the source-controller image
#   $CACHE/flux/<hash>/kustomize-controller.tar  the kustomize-controller image
#   $CACHE/flux/<hash>/flux.yaml                 namespace flux-system, the controllers' CRDs,
#                                                RBAC, the source-controller Service, the Deployments
#   $CACHE/flux/<hash>/flux.env                  references, image IDs, paths (shell assignments)
#
#   DOCKER_HOST=... hack/flux/images.sh    # prints the flux.env path on stdout
#
# Each image is the static binary alone (plus the host's CA bundle and a
# /tmp), imported with docker import, run as 65534 as Flux's own images
# are. The manifests are the bench's own, smaller than Flux's install: no
# notification-controller (no events address), kustomize-controller bound
# to cluster-admin as Flux binds it, and the namespace labelled
# zarf.dev/agent=ignore, since the images are loaded into the node and not
# served by the slot's registry that zarf's agent would point the pods at.
#
# CACHE is $KUBECTL_BUNDLE_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/kubectl-bundle.
# Needs a Docker engine (hack/docker/ensure.sh). Builds run at nice 19.
set -o errexit -o nounset -o pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cache=${KUBECTL_BUNDLE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-bundle}
GO=${GO:-go}
label=dev.kubectl-bundle.bench
tools="$root/hack/tools/flux"

say() { echo "flux: $*" >&2; }
die() {
  say "$*"
  exit 3
}
gomod_version() { awk -v m="$1" '$1 != "//" {for (i = 1; i < NF; i++) if ($i == m) {print $(i+1); exit}}' "$2"; }

SOURCE_VERSION=$(gomod_version github.com/fluxcd/source-controller "$tools/go.mod")
KUSTOMIZE_VERSION=$(gomod_version github.com/fluxcd/kustomize-controller "$tools/go.mod")
{ [ -n "$SOURCE_VERSION" ] && [ -n "$KUSTOMIZE_VERSION" ]; } || die "$tools/go.mod names no source-controller or kustomize-controller version"

hash=$(
  {
    cat "$tools/go.mod" "$tools/go.sum" "$root/hack/flux/images.sh"
    "$GO" env GOVERSION
  } | sha256sum | cut -c1-16
)
# The binaries depend on the tools module only.
bin_hash=$(
  {
    cat "$tools/go.mod" "$tools/go.sum"
    "$GO" env GOVERSION
  } | sha256sum | cut -c1-16
)
out="$cache/flux/$hash"
if [ -f "$out/flux.env" ] && [ -s "$out/source-controller.tar" ] && [ -s "$out/kustomize-controller.tar" ]; then
  echo "$out/flux.env"
  exit 0
fi
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || die "no Docker engine at ${DOCKER_HOST:-the default socket} (hack/docker/ensure.sh start)"
mods=$(cd "$tools" && "$GO" mod download github.com/fluxcd/source-controller github.com/fluxcd/kustomize-controller &&
  "$GO" list -m -f '{{.Path}}={{.Dir}}' github.com/fluxcd/source-controller github.com/fluxcd/kustomize-controller) ||
  die "downloading Flux's modules for $tools"
source_dir=$(echo "$mods" | awk -F= '$1 == "github.com/fluxcd/source-controller" {print $2}')
kustomize_dir=$(echo "$mods" | awk -F= '$1 == "github.com/fluxcd/kustomize-controller" {print $2}')
{ [ -d "$source_dir/config/crd/bases" ] && [ -d "$kustomize_dir/config/crd/bases" ]; } || die "the controllers' CRDs are missing from the module cache"

mkdir -p "$cache/flux"
exec 7>"$cache/.flux-build.lock"
flock -n 7 || {
  say "another hack/flux/images.sh holds $cache/.flux-build.lock; waiting for it"
  flock 7
  if [ -f "$out/flux.env" ]; then
    echo "$out/flux.env"
    exit 0
  fi
}
work="$cache/flux/work-$hash"
rm -rf "$work"
mkdir -p "$work" "$out"
trap 'rm -rf "$work"' EXIT
t0=$(date +%s)

# --- binaries (nice 19: the machine's cores are shared) ---
bin="$cache/flux/bin-$bin_hash"
if [ ! -f "$bin/.done" ]; then
  say "building source-controller $SOURCE_VERSION and kustomize-controller $KUSTOMIZE_VERSION into $bin (cold: about 10 minutes on 2 cores)"
  mkdir -p "$bin"
  for p in source-controller kustomize-controller; do
    (cd "$tools" && nice -n 19 env CGO_ENABLED=0 "$GO" build -trimpath -ldflags "-s -w" -o "$bin/$p" "github.com/fluxcd/$p")
  done
  touch "$bin/.done"
fi
t_bin=$(date +%s)

say "images and manifests into $out"
declare -A ref
for p in source-controller kustomize-controller; do
  v=$SOURCE_VERSION
  [ "$p" = source-controller ] || v=$KUSTOMIZE_VERSION
  ref[$p]="kb-bench/flux-$p:$v-$hash"
  d="$work/img-$p"
  mkdir -p "$d/tmp" "$d/etc/ssl/certs" "$d/usr/local/bin"
  chmod 1777 "$d/tmp"
  [ ! -f /etc/ssl/certs/ca-certificates.crt ] || cp /etc/ssl/certs/ca-certificates.crt "$d/etc/ssl/certs/"
  install -m 0755 "$bin/$p" "$d/usr/local/bin/$p"
  tar -C "$d" -c . | docker import -c "LABEL $label=image" -c "USER 65534:65534" -c "ENTRYPOINT [\"/usr/local/bin/$p\"]" - "${ref[$p]}" >/dev/null
  docker save "${ref[$p]}" -o "$out/$p.tar.tmp"
  mv "$out/$p.tar.tmp" "$out/$p.tar"
done

# The manifests: the namespace, every CRD the two controllers watch, and
# the bench's RBAC and Deployments (after Flux's config/manager, smaller).
{
  cat <<'EOF'
apiVersion: v1
kind: Namespace
metadata:
  name: flux-system
  labels:
    zarf.dev/agent: ignore
EOF
  for f in "$source_dir"/config/crd/bases/*.yaml "$kustomize_dir"/config/crd/bases/*.yaml; do
    echo "---"
    sed '/^---$/d' "$f"
  done
  cat <<EOF
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: source-controller, namespace: flux-system}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: kustomize-controller, namespace: flux-system}
---
# source-controller: its own objects, the secrets and config maps they may
# name, events and its leader-election lease.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: kb-bench-flux-source-controller}
rules:
- apiGroups: [source.toolkit.fluxcd.io]
  resources: ["*"]
  verbs: ["*"]
- apiGroups: [""]
  resources: [secrets, configmaps, serviceaccounts]
  verbs: [get, list, watch]
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, list, watch, create, update, patch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: kb-bench-flux-source-controller}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: kb-bench-flux-source-controller}
subjects: [{kind: ServiceAccount, name: source-controller, namespace: flux-system}]
---
# kustomize-controller applies whatever the artifact holds: cluster-admin,
# as Flux's own install binds it (cluster-reconciler).
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: kb-bench-flux-kustomize-controller}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: kustomize-controller, namespace: flux-system}]
---
# kustomize-controller fetches each artifact from source-controller's
# storage server through this Service (the --storage-adv-addr below).
apiVersion: v1
kind: Service
metadata: {name: source-controller, namespace: flux-system}
spec:
  selector: {app: source-controller}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: source-controller, namespace: flux-system}
spec:
  replicas: 1
  strategy: {type: Recreate}
  selector: {matchLabels: {app: source-controller}}
  template:
    metadata: {labels: {app: source-controller}}
    spec:
      serviceAccountName: source-controller
      terminationGracePeriodSeconds: 10
      securityContext: {fsGroup: 1337}
      containers:
      - name: manager
        image: ${ref[source-controller]}
        imagePullPolicy: IfNotPresent
        securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true, capabilities: {drop: [ALL]}}
        ports:
        - {containerPort: 9090, name: http}
        - {containerPort: 9440, name: healthz}
        env:
        - name: RUNTIME_NAMESPACE
          valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
        - {name: TUF_ROOT, value: /tmp/.sigstore}
        args:
        - --watch-all-namespaces
        - --log-level=info
        - --log-encoding=console
        - --enable-leader-election=false
        - --storage-path=/data
        - --storage-adv-addr=source-controller.\$(RUNTIME_NAMESPACE).svc.cluster.local.
        readinessProbe: {httpGet: {port: http, path: /}, periodSeconds: 2}
        volumeMounts:
        - {name: data, mountPath: /data}
        - {name: tmp, mountPath: /tmp}
      volumes:
      - {name: data, emptyDir: {}}
      - {name: tmp, emptyDir: {}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: kustomize-controller, namespace: flux-system}
spec:
  replicas: 1
  strategy: {type: Recreate}
  selector: {matchLabels: {app: kustomize-controller}}
  template:
    metadata: {labels: {app: kustomize-controller}}
    spec:
      serviceAccountName: kustomize-controller
      terminationGracePeriodSeconds: 10
      containers:
      - name: manager
        image: ${ref[kustomize-controller]}
        imagePullPolicy: IfNotPresent
        securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true, capabilities: {drop: [ALL]}}
        ports:
        - {containerPort: 9440, name: healthz}
        env:
        - name: RUNTIME_NAMESPACE
          valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
        args:
        - --watch-all-namespaces
        - --log-level=info
        - --log-encoding=console
        - --enable-leader-election=false
        readinessProbe: {httpGet: {path: /readyz, port: healthz}, periodSeconds: 2}
        volumeMounts:
        - {name: tmp, mountPath: /tmp}
      volumes:
      - {name: tmp, emptyDir: {}}
EOF
} >"$out/flux.yaml"

id_of() { docker image inspect --format '{{.Id}}' "$1"; }
size_of() { docker image inspect --format '{{.Size}}' "$1"; }
t_end=$(date +%s)
cat >"$out/flux.env.tmp" <<EOF
# kubectl-bundle bench Flux ($hash): docker load -i each archive beside this file.
KB_FLUX_DIR=$out
KB_FLUX_MANIFESTS=$out/flux.yaml
KB_FLUX_SOURCE_VERSION=$SOURCE_VERSION
KB_FLUX_KUSTOMIZE_VERSION=$KUSTOMIZE_VERSION
KB_FLUX_SOURCE_IMAGE=${ref[source-controller]}
KB_FLUX_SOURCE_IMAGE_ID=$(id_of "${ref[source-controller]}")
KB_FLUX_SOURCE_IMAGE_SIZE=$(size_of "${ref[source-controller]}")
KB_FLUX_KUSTOMIZE_IMAGE=${ref[kustomize-controller]}
KB_FLUX_KUSTOMIZE_IMAGE_ID=$(id_of "${ref[kustomize-controller]}")
KB_FLUX_KUSTOMIZE_IMAGE_SIZE=$(size_of "${ref[kustomize-controller]}")
# build seconds: binaries $((t_bin - t0)), images and manifests $((t_end - t_bin))
EOF
mv "$out/flux.env.tmp" "$out/flux.env"
say "done in $((t_end - t0)) s (binaries $((t_bin - t0)) s, images and manifests $((t_end - t_bin)) s)"
echo "$out/flux.env"
