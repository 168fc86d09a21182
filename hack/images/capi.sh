#!/usr/bin/env bash
# capi.sh: the bench's Cluster API, built offline from pinned modules, saved
# as docker-save archives and cached by the hash of its pins outside the
# clone, beside the node image's (hack/images/build.sh):
#
#   $CACHE/capi/<hash>/capi-manager.tar                  core controller
#   $CACHE/capi/<hash>/kubeadm-bootstrap-manager.tar     kubeadm bootstrap provider
#   $CACHE/capi/<hash>/kubeadm-control-plane-manager.tar kubeadm control-plane provider
#   $CACHE/capi/<hash>/capd-manager.tar                  CAPD (the Docker infrastructure provider)
#   $CACHE/capi/<hash>/haproxy.tar                       CAPD's load balancer (Debian's haproxy)
#   $CACHE/capi/<hash>/manifests/*.yaml                  the four providers' manifests, these images, webhook Secrets
#   $CACHE/capi/<hash>/capi.env                          references, image IDs, paths (shell assignments)
#
#   DOCKER_HOST=... hack/images/capi.sh [TOOLS]   # prints the capi.env path on stdout
#   CAPI_PREFETCH=1 hack/images/capi.sh [TOOLS]   # the slow part only, no engine needed
#
# CAPI_PREFETCH=1 builds what takes long (the four managers, about 15
# minutes cold, and the load balancer's root filesystem) into the same
# cache and stops before the images: start it early, beside other work,
# while no Docker engine of the bench runs; the next full run finds both.
#
# TOOLS is the tools module that pins the Cluster API to build, default
# hack/tools/capi (the site's v1.14.2); hack/tools/capi-v1.13 is the older
# release experiment (d) installs on slot b. Each is cached by its own pins.
# Where the module has no core/ package (before v1.14), the core manager is
# the module's root package and its config tree config/default.
#
# CACHE is $KUBECTL_BUNDLE_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/kubectl-bundle.
# Needs root (debootstrap for the load balancer's root filesystem) and a
# Docker engine (hack/docker/ensure.sh). Pins: TOOLS (Cluster API and its
# test module), hack/tools/capi's renderer (the kustomize library), Debian
# bookworm's haproxy, and this script. Builds run at nice 19; run it inside
# hack/lowcpu.sh.
set -o errexit -o nounset -o pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cache=${KUBECTL_BUNDLE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-bundle}
GO=${GO:-go}
label=dev.kubectl-bundle.bench
render_src="$root/hack/tools/capi"

say() { echo "capi: $*" >&2; }
die() {
  say "$*"
  exit 3
}
tools=$(cd "${1:-$root/hack/tools/capi}" 2>/dev/null && pwd) || die "no tools module at $1"
gomod_version() { awk -v m="$1" '$1 != "//" {for (i = 1; i < NF; i++) if ($i == m) {print $(i+1); exit}}' "$2"; }

CAPI_VERSION=$(gomod_version sigs.k8s.io/cluster-api "$tools/go.mod")
CAPD_VERSION=$(gomod_version sigs.k8s.io/cluster-api/test "$tools/go.mod")
{ [ -n "$CAPI_VERSION" ] && [ -n "$CAPD_VERSION" ]; } || die "$tools/go.mod names no cluster-api or cluster-api/test version"
# The load balancer's Debian packages (bookworm); the list is part of the pin.
LB_PACKAGES=haproxy

hash=$(
  cd "$root"
  {
    cat "$tools/go.mod" "$tools/go.sum" "$render_src/render/main.go" hack/images/capi.sh
    echo "$LB_PACKAGES"
    "$GO" env GOVERSION
  } | sha256sum | cut -c1-16
)
# The binaries depend on the tools module only, so a change to how the
# images are assembled does not rebuild them.
bin_hash=$(
  cd "$root"
  {
    cat "$tools/go.mod" "$tools/go.sum" "$render_src/render/main.go"
    "$GO" env GOVERSION
  } | sha256sum | cut -c1-16
)
out="$cache/capi/$hash"
if [ -f "$out/capi.env" ]; then
  echo "$out/capi.env"
  exit 0
fi

[ "$(id -u)" = 0 ] || die "building the load balancer's root filesystem needs root (debootstrap)"
prefetch=${CAPI_PREFETCH:-0}
if [ "$prefetch" != 1 ]; then
  docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || die "no Docker engine at ${DOCKER_HOST:-the default socket} (hack/docker/ensure.sh start)"
fi
# go list -m names a module's directory only once it is in the module cache.
(cd "$tools" && "$GO" mod download sigs.k8s.io/cluster-api sigs.k8s.io/cluster-api/test) || die "downloading Cluster API's modules for $tools"
mods=$(cd "$tools" && "$GO" list -m -f '{{.Path}}={{.Dir}}' sigs.k8s.io/cluster-api sigs.k8s.io/cluster-api/test)
capi_dir=$(echo "$mods" | awk -F= '$1 == "sigs.k8s.io/cluster-api" {print $2}')
capd_dir=$(echo "$mods" | awk -F= '$1 == "sigs.k8s.io/cluster-api/test" {print $2}')/infrastructure/docker
# The core manager: the core/ package from v1.14 on, the module's root before.
if [ -d "$capi_dir/core/config/default" ]; then
  core_pkg=sigs.k8s.io/cluster-api/core core_tree=$capi_dir/core/config/default
else
  core_pkg=sigs.k8s.io/cluster-api core_tree=$capi_dir/config/default
fi
[ -d "$core_tree" ] || die "cluster-api $CAPI_VERSION's config trees are missing from the module cache ($capi_dir)"
[ -d "$capd_dir/config/default" ] || die "CAPD $CAPD_VERSION's config tree is missing from the module cache ($capd_dir)"

exec 7>"$cache/.capi-build.lock"
flock -n 7 || {
  say "another capi.sh holds $cache/.capi-build.lock; waiting for it"
  flock 7
  if [ -f "$out/capi.env" ]; then
    echo "$out/capi.env"
    exit 0
  fi
}
work="$cache/capi/work-$hash"
rm -rf "$work"
mkdir -p "$work" "$out/manifests"
trap 'rm -rf "$work"' EXIT
t0=$(date +%s)

# --- the load balancer's root filesystem (Debian bookworm's haproxy) ---
# CAPD writes its configuration into the container with mkdir and cp and
# reads it back with cat, then sends SIGHUP: minbase's coreutils and
# haproxy in master-worker mode (-W) do all of that.
lb_tar="$cache/rootfs/haproxy-bookworm-$(echo "$LB_PACKAGES" | sha256sum | cut -c1-12).tar"
if [ ! -f "$lb_tar" ]; then
  command -v debootstrap >/dev/null 2>&1 || "$root/hack/tools/apt.sh" install -y -qq debootstrap >/dev/null
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $3 ~ /^bookworm$/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [ -n "$mirror" ] || die "no Debian mirror in apt's sources"
  say "debootstrap bookworm with $LB_PACKAGES (Debian's packages; about 2 minutes)"
  mkdir -p "$cache/rootfs"
  nice -n 19 debootstrap --variant=minbase --include="$LB_PACKAGES" bookworm "$work/lb" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    die "debootstrap failed: $(tail -5 "$work/debootstrap.log")"
  rm -rf "$work/lb/var/cache/apt/archives/"*.deb "$work/lb/var/lib/apt/lists/"*
  tar -C "$work/lb" -cf "$lb_tar.tmp" .
  mv "$lb_tar.tmp" "$lb_tar"
  rm -rf "$work/lb"
fi
t_rootfs=$(date +%s)

# --- binaries (nice 19: the machine's cores are shared) ---
bin="$cache/capi/bin-$bin_hash"
if [ ! -f "$bin/.done" ]; then
  say "building Cluster API $CAPI_VERSION (core, kubeadm bootstrap, kubeadm control plane) and CAPD $CAPD_VERSION into $bin (cold: about 15 minutes on 2 cores)"
  mkdir -p "$bin"
  build() { # OUT PACKAGE
    (cd "$tools" && nice -n 19 env CGO_ENABLED=0 "$GO" build -trimpath -ldflags "-s -w" -o "$bin/$1" "$2")
  }
  build capi-manager "$core_pkg"
  build kubeadm-bootstrap-manager sigs.k8s.io/cluster-api/bootstrap/kubeadm
  build kubeadm-control-plane-manager sigs.k8s.io/cluster-api/controlplane/kubeadm
  build capd-manager sigs.k8s.io/cluster-api/test/infrastructure/docker
  (cd "$render_src" && nice -n 19 "$GO" build -trimpath -o "$bin/render" ./render)
  touch "$bin/.done"
fi
t_bin=$(date +%s)
if [ "$prefetch" = 1 ]; then
  say "prefetched: the load balancer's root filesystem ($((t_rootfs - t0)) s) and the managers in $bin ($((t_bin - t_rootfs)) s); the images are made by a run without CAPI_PREFETCH"
  exit 0
fi

# import_image ROOTDIR REF [docker import -c changes...]
import_image() {
  local dir=$1 ref=$2
  shift 2
  local changes=(-c "LABEL $label=image")
  local c
  for c in "$@"; do changes+=(-c "$c"); done
  tar -C "$dir" -c . | docker import "${changes[@]}" - "$ref" >/dev/null
}

say "images and manifests into $out"
refs=()
# binary (and image name), user, kustomize tree, manifest
while read -r name user tree manifest; do
  ref="kb-bench/$name:$CAPI_VERSION-$hash"
  if [ "$name" = capd-manager ]; then ref="kb-bench/$name:$CAPD_VERSION-$hash"; fi
  d="$work/img-$name"
  mkdir -p "$d/tmp" "$d/etc/ssl/certs"
  chmod 1777 "$d/tmp"
  [ -f /etc/ssl/certs/ca-certificates.crt ] && cp /etc/ssl/certs/ca-certificates.crt "$d/etc/ssl/certs/"
  install -m 0755 "$bin/$name" "$d/manager"
  import_image "$d" "$ref" 'ENTRYPOINT ["/manager"]' "USER $user"
  docker save "$ref" -o "$out/$name.tar"
  "$bin/render" -kustomize "$tree" -image "$ref" -ca "$out/ca" -o "$out/manifests/$manifest.yaml"
  refs+=("$name=$ref")
done <<EOF
capi-manager 65532:65532 $core_tree core
kubeadm-bootstrap-manager 65532:65532 $capi_dir/bootstrap/kubeadm/config/default bootstrap-kubeadm
kubeadm-control-plane-manager 65532:65532 $capi_dir/controlplane/kubeadm/config/default control-plane-kubeadm
capd-manager 0:0 $capd_dir/config/default infrastructure-docker
EOF

tar -xOf "$lb_tar" ./var/lib/dpkg/status >"$work/dpkg-status"
lb_version=$(awk '/^Package: haproxy$/ {p = 1} p && /^Version:/ && !v {v = $2} END {print v}' "$work/dpkg-status")
[ -n "$lb_version" ] || die "no haproxy in $lb_tar"
lb_tag="${lb_version//[^A-Za-z0-9_.-]/_}-$hash"
lb_ref="kb-bench/haproxy:$lb_tag"
d="$work/img-haproxy"
mkdir -p "$d"
tar -C "$d" -xf "$lb_tar"
mkdir -p "$d/usr/local/etc/haproxy" "$d/run/haproxy"
# A configuration that starts: CAPD replaces it once the first control-plane
# machine has an address, then sends SIGHUP. No maxconn: haproxy sizes it
# from the open-file limit it gets (a fixed large one makes it exit where
# that limit is lower, see hack/capd/lib.sh).
cat >"$d/usr/local/etc/haproxy/haproxy.cfg" <<'EOF'
global
  log stdout format raw local0 notice
defaults
  mode tcp
  timeout connect 5000
  timeout client 50000
  timeout server 50000
frontend control-plane
  bind *:6443
  default_backend kube-apiservers
backend kube-apiservers
EOF
import_image "$d" "$lb_ref" 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' 'ENTRYPOINT ["haproxy", "-W", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]'
docker save "$lb_ref" -o "$out/haproxy.tar"

id_of() { docker image inspect --format '{{.Id}}' "$1"; }
ref_of() { printf '%s\n' "${refs[@]}" | awk -F= -v n="$1" '$1 == n {print $2}'; }
t_end=$(date +%s)
cat >"$out/capi.env.tmp" <<EOF
# kubectl-bundle bench Cluster API ($hash): docker load -i each archive beside this file.
KB_CAPI_DIR=$out
KB_CAPI_VERSION=$CAPI_VERSION
KB_CAPD_VERSION=$CAPD_VERSION
KB_CAPI_MANIFESTS=$out/manifests
KB_CAPI_IMAGE=$(ref_of capi-manager)
KB_CAPI_IMAGE_ID=$(id_of "$(ref_of capi-manager)")
KB_CABPK_IMAGE=$(ref_of kubeadm-bootstrap-manager)
KB_CABPK_IMAGE_ID=$(id_of "$(ref_of kubeadm-bootstrap-manager)")
KB_KCP_IMAGE=$(ref_of kubeadm-control-plane-manager)
KB_KCP_IMAGE_ID=$(id_of "$(ref_of kubeadm-control-plane-manager)")
KB_CAPD_IMAGE=$(ref_of capd-manager)
KB_CAPD_IMAGE_ID=$(id_of "$(ref_of capd-manager)")
KB_HAPROXY_IMAGE=$lb_ref
KB_HAPROXY_IMAGE_ID=$(id_of "$lb_ref")
KB_HAPROXY_REPOSITORY=kb-bench
KB_HAPROXY_TAG=$lb_tag
# build seconds: load balancer root filesystem $((t_rootfs - t0)), binaries $((t_bin - t_rootfs)), images and manifests $((t_end - t_bin))
EOF
mv "$out/capi.env.tmp" "$out/capi.env"
say "done in $((t_end - t0)) s (load balancer root filesystem $((t_rootfs - t0)) s, binaries $((t_bin - t_rootfs)) s, images and manifests $((t_end - t_bin)) s)"
echo "$out/capi.env"
