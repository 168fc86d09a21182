#!/usr/bin/env bash
# build.sh: the bench's images, built offline from pinned sources, saved as
# docker-save archives (as a site receives them) and cached by the hash of
# their pins outside the clone:
#
#   $CACHE/images/<hash>/node.tar      kind node image, Kubernetes $KUBE_VERSION (kube-proxy, CoreDNS, bridge CNI)
#   $CACHE/images/<hash>/registry.tar  the slot's registry (distribution v3)
#   $CACHE/images/<hash>/workload.tar  a small HTTP workload (hack/images/workload)
#   $CACHE/images/<hash>/images.env    their references and image IDs (shell assignments)
#
#   DOCKER_HOST=... hack/images/build.sh    # prints the images.env path on stdout
#
# CACHE is $KUBECTL_BUNDLE_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/kubectl-bundle.
# Needs root (debootstrap, chroot) and a Docker engine (hack/docker/ensure.sh).
# Pins: hack/tools/node (Kubernetes, etcd, crictl), hack/tools/coredns,
# hack/tools/registry, kind's base files from the main module's kind, Debian
# bookworm's packages for the node's root filesystem, and this directory
# (less capi.sh, the Cluster API images' own script, cached by its own pins).
set -o errexit -o nounset -o pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cache=${KUBECTL_BUNDLE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-bundle}
GO=${GO:-go}
label=dev.kubectl-bundle.bench
export DOCKER_BUILDKIT=0

say() { echo "images: $*" >&2; }
die() {
  say "$*"
  exit 3
}
gomod_version() { awk -v m="$1" '$1 != "//" {for (i = 1; i < NF; i++) if ($i == m) {print $(i+1); exit}}' "$2"; }

KUBE_VERSION=$(gomod_version k8s.io/kubernetes "$root/hack/tools/node/go.mod")
KIND_VERSION=$(gomod_version sigs.k8s.io/kind "$root/go.mod")
REGISTRY_VERSION=$(gomod_version github.com/distribution/distribution/v3 "$root/hack/tools/registry/go.mod")
minor=$(echo "$KUBE_VERSION" | cut -d. -f2)
# The node's Debian packages (bookworm); the list is part of the pin.
PACKAGES=systemd,systemd-sysv,dbus,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,bash,ca-certificates,curl,jq,procps,containerd,runc,conntrack,socat,ebtables,containernetworking-plugins,e2fsprogs

hash=$(
  cd "$root"
  {
    cat hack/tools/node/go.mod hack/tools/node/go.sum hack/tools/coredns/go.mod hack/tools/coredns/go.sum \
      hack/tools/registry/go.mod hack/tools/registry/go.sum
    find hack/images -type f ! -name capi.sh | LC_ALL=C sort | xargs cat
    echo "$KIND_VERSION $PACKAGES"
  } | sha256sum | cut -c1-16
)
# The binaries depend on the tools modules and the two small programs only,
# so a change to how the images are assembled does not rebuild them.
bin_hash=$(
  cd "$root"
  {
    cat hack/tools/node/go.mod hack/tools/node/go.sum hack/tools/coredns/go.mod hack/tools/coredns/go.sum \
      hack/tools/registry/go.mod hack/tools/registry/go.sum
    find hack/images/pause hack/images/workload -type f | LC_ALL=C sort | xargs cat
    "$GO" env GOVERSION
  } | sha256sum | cut -c1-16
)
out="$cache/images/$hash"
# A cache entry is whole or not there: an images.env beside a missing or
# empty archive (written by a version that went on after a failed save)
# is built again.
if [ -f "$out/images.env" ] && [ -s "$out/node.tar" ] && [ -s "$out/registry.tar" ] && [ -s "$out/workload.tar" ]; then
  echo "$out/images.env"
  exit 0
fi

[ "$(id -u)" = 0 ] || die "building the node image needs root (debootstrap, chroot)"
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || die "no Docker engine at ${DOCKER_HOST:-the default socket} (hack/docker/ensure.sh start)"
kind_dir=$(cd "$root" && "$GO" mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | awk -F'"' '$2 == "Dir" {print $4}')
[ -d "$kind_dir/images/base/files" ] || die "kind $KIND_VERSION's base files are missing from the module cache"

work="$cache/images/work-$hash"
rm -rf "$work"
mkdir -p "$work" "$out"
cleanup() {
  if [ -n "${cpid:-}" ]; then kill "$cpid" 2>/dev/null || true; fi
  # The root filesystem holds bind-mount points and root-owned files.
  rm -rf "$work"
}
trap cleanup EXIT
t0=$(date +%s)

# The root filesystem first: debootstrap waits on the network and the disk,
# while the binaries wait for the envtest kube build's lock and the CPU.
# --- the node's root filesystem (Debian bookworm, cached by package list) ---
rootfs_tar="$cache/rootfs/bookworm-$(echo "$PACKAGES" | sha256sum | cut -c1-12).tar"
if [ ! -f "$rootfs_tar" ]; then
  command -v debootstrap >/dev/null 2>&1 || "$root/hack/tools/apt.sh" install -y -qq debootstrap >/dev/null
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $3 ~ /^bookworm$/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [ -n "$mirror" ] || die "no Debian mirror in apt's sources"
  say "debootstrap bookworm (Debian's packages; about 90 s)"
  mkdir -p "$cache/rootfs" "$work/debootstrap"
  nice -n 10 debootstrap --variant=minbase --include="$PACKAGES" bookworm "$work/debootstrap" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    die "debootstrap failed: $(tail -5 "$work/debootstrap.log")"
  rm -rf "$work/debootstrap/var/cache/apt/archives/"*.deb "$work/debootstrap/var/lib/apt/lists/"*
  tar -C "$work/debootstrap" -cf "$rootfs_tar.tmp" .
  mv "$rootfs_tar.tmp" "$rootfs_tar"
  rm -rf "$work/debootstrap"
fi
t_rootfs=$(date +%s)

# --- binaries (nice: the machine's cores are shared) ---
bin="$cache/bin/$bin_hash"
if [ ! -f "$bin/.done" ]; then
  say "building Kubernetes $KUBE_VERSION, etcd, crictl, CoreDNS, registry $REGISTRY_VERSION, pause and workload into $bin (cold: about 12 minutes on 2 cores)"
  mkdir -p "$bin"
  # First what shares nothing with the Makefile's envtest build.
  (cd "$root/hack/tools/coredns" && nice -n 10 env CGO_ENABLED=0 "$GO" build -trimpath -ldflags "-s -w" -o "$bin/coredns" github.com/coredns/coredns)
  (cd "$root/hack/tools/registry" && nice -n 10 env CGO_ENABLED=0 "$GO" build -trimpath -ldflags "-s -w" -o "$bin/registry" github.com/distribution/distribution/v3/cmd/registry)
  (cd "$root" && CGO_ENABLED=0 "$GO" build -trimpath -ldflags "-s -w" -o "$bin/pause" ./hack/images/pause)
  (cd "$root" && CGO_ENABLED=0 "$GO" build -trimpath -ldflags "-s -w" -o "$bin/workload" ./hack/images/workload)
  # The Makefile's envtest build (kube-apiserver and etcd from the same
  # module, same flags) holds this lock while it compiles: waiting for it,
  # rather than compiling the same packages beside it, finds them in Go's
  # build cache.
  exec 8>"$cache/.node-build.lock"
  flock -n 8 || {
    say "waiting for the envtest build of kube-apiserver and etcd (same module; its packages are then compiled)"
    flock 8
  }
  kver="-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  (cd "$root/hack/tools/node" && nice -n 10 env CGO_ENABLED=0 "$GO" build -trimpath -ldflags "-s -w $kver" -o "$bin/" \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubeadm k8s.io/kubernetes/cmd/kubectl \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy sigs.k8s.io/cri-tools/cmd/crictl)
  (cd "$root/hack/tools/node" && nice -n 10 env CGO_ENABLED=0 "$GO" build -trimpath -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3)
  exec 8>&-
  touch "$bin/.done"
fi
t_bin=$(date +%s)

fs="$work/rootfs"
mkdir -p "$fs"
tar -C "$fs" -xf "$rootfs_tar"

# libs_of copies an executable of the root filesystem and the shared
# libraries it links into directory $2 (a component image's root).
libs_of() {
  local exe=$1 dest=$2 lib
  mkdir -p "$dest$(dirname "$exe")"
  cp -a "$fs$exe" "$dest$exe"
  for lib in $(chroot "$fs" ldd "$exe" 2>/dev/null | awk '{for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i}'); do
    mkdir -p "$dest$(dirname "$lib")"
    cp -L "$fs$lib" "$dest$lib"
  done
}

# import_image ROOTDIR REF [docker import -c changes...]
import_image() {
  local dir=$1 ref=$2
  shift 2
  local changes=(-c "LABEL $label=image")
  local c
  for c in "$@"; do changes+=(-c "$c"); done
  tar -C "$dir" -c . | docker import "${changes[@]}" - "$ref" >/dev/null
}

# --- component images, named as kubeadm lists them ---
say "component images for Kubernetes $KUBE_VERSION"
mapfile -t kimages < <("$bin/kubeadm" config images list --kubernetes-version "$KUBE_VERSION" 2>/dev/null)
[ "${#kimages[@]}" -ge 6 ] || die "kubeadm config images list printed ${#kimages[*]} images"
mkdir -p "$work/archives"
for ref in "${kimages[@]}"; do
  name=${ref##*/}
  name=${name%%:*}
  d="$work/img-$name"
  mkdir -p "$d/usr/local/bin" "$d/etc/ssl/certs" "$d/tmp"
  cp "$fs/etc/ssl/certs/ca-certificates.crt" "$d/etc/ssl/certs/"
  entry=()
  case $name in
  pause) cp "$bin/pause" "$d/pause" && entry=('ENTRYPOINT ["/pause"]') ;;
  etcd) cp "$bin/etcd" "$d/usr/local/bin/etcd" ;;
  coredns) cp "$bin/coredns" "$d/coredns" && entry=('ENTRYPOINT ["/coredns"]') ;;
  kube-proxy)
    cp "$bin/kube-proxy" "$d/usr/local/bin/"
    for exe in /usr/sbin/xtables-nft-multi /usr/sbin/xtables-legacy-multi /usr/sbin/nft /usr/sbin/conntrack; do
      libs_of "$exe" "$d"
    done
    mkdir -p "$d/usr/lib/x86_64-linux-gnu"
    cp -a "$fs/usr/lib/x86_64-linux-gnu/xtables" "$d/usr/lib/x86_64-linux-gnu/"
    # The match and target modules link libraries of their own (statistic
    # needs libm): without them kube-proxy's iptables-restore fails as soon
    # as a Service has two endpoints, and no Service rule is written.
    for so in "$fs"/usr/lib/x86_64-linux-gnu/xtables/*.so; do
      libs_of "${so#"$fs"}" "$d"
    done
    for t in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
      ln -sf xtables-nft-multi "$d/usr/sbin/$t"
    done
    for t in iptables-legacy iptables-legacy-save iptables-legacy-restore ip6tables-legacy ip6tables-legacy-save ip6tables-legacy-restore; do
      ln -sf xtables-legacy-multi "$d/usr/sbin/$t"
    done
    for t in iptables-nft iptables-nft-save iptables-nft-restore ip6tables-nft ip6tables-nft-save ip6tables-nft-restore; do
      ln -sf xtables-nft-multi "$d/usr/sbin/$t"
    done
    mkdir -p "$d/run" "$d/var/run" "$d/lib/modules"
    ;;
  *) cp "$bin/$name" "$d/usr/local/bin/$name" ;;
  esac
  import_image "$d" "$ref" 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' "${entry[@]}"
  docker save "$ref" -o "$work/archives/$name.tar"
done

# --- the node image: kind's base image, laid out from Debian's packages ---
say "node image (kind $KIND_VERSION base files, Kubernetes $KUBE_VERSION)"
files="$kind_dir/images/base/files"
install -m 0755 "$files"/usr/local/bin/* "$fs/usr/local/bin/"
mkdir -p "$fs/kind/bin" "$fs/LICENSES" "$fs/etc/containerd" "$fs/etc/systemd/system/kubelet.service.d" "$fs/etc/kubernetes/manifests"
cp -r "$files/kind/." "$fs/kind/"
chmod 0755 "$fs/kind" "$fs/kind/bin" "$fs"/kind/bin/*
cp "$files"/LICENSES/* "$fs/LICENSES/"
cp "$files/etc/crictl.yaml" "$fs/etc/"
cp "$files"/etc/default/* "$fs/etc/default/"
cp "$files"/etc/sysctl.d/* "$fs/etc/sysctl.d/"
find "$files/etc/systemd/system" -maxdepth 1 -type f -exec cp {} "$fs/etc/systemd/system/" \;
cp "$files"/etc/systemd/system/kubelet.service.d/* "$fs/etc/systemd/system/kubelet.service.d/"
# kind's containerd config, with the pause image kubeadm names and the
# oom_score_adj restriction a node without CAP_SYS_RESOURCE needs.
pause_ref=$(printf '%s\n' "${kimages[@]}" | grep '/pause:')
sed -e "s#sandbox_image = .*#sandbox_image = \"$pause_ref\"#" \
  -e 's#restrict_oom_score_adj = false#restrict_oom_score_adj = true#' \
  "$files/etc/containerd/config.toml" >"$fs/etc/containerd/config.toml"
grep -q 'restrict_oom_score_adj = true' "$fs/etc/containerd/config.toml" || die "kind's containerd config has no restrict_oom_score_adj line to set"
# Debian's containerd, runc and CNI plugins where kind's layout expects them.
ln -sf /usr/bin/containerd "$fs/usr/local/bin/containerd"
ln -sf /usr/bin/containerd-shim-runc-v2 "$fs/usr/local/bin/containerd-shim-runc-v2"
ln -sf /usr/bin/ctr "$fs/usr/local/bin/ctr"
mkdir -p "$fs/opt/cni"
rm -rf "$fs/opt/cni/bin"
ln -s /usr/lib/cni "$fs/opt/cni/bin"
install -m 0755 "$bin/crictl" "$fs/usr/local/bin/crictl"
for b in kubelet kubeadm kubectl; do install -m 0755 "$bin/$b" "$fs/usr/bin/$b"; done
echo "$KUBE_VERSION" >"$fs/kind/version"
chroot "$fs" ctr oci spec |
  chroot "$fs" jq '.hooks.createContainer[.hooks.createContainer | length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' |
  chroot "$fs" jq 'del(.process.rlimits)' >"$fs/etc/containerd/cri-base.json"
# The CNI: a bridge baked into the image (kindnetd cannot be built offline).
mkdir -p "$fs/etc/cni/net.d" "$fs/kind/manifests"
cat >"$fs/etc/cni/net.d/10-bridge.conflist" <<'EOF'
{
  "cniVersion": "0.4.0",
  "name": "kb-bridge",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
cat >"$fs/kind/manifests/default-cni.yaml" <<'EOF'
# The node image's CNI is the bridge in /etc/cni/net.d; kind applies this
# file and nothing more is needed.
apiVersion: v1
kind: ConfigMap
metadata:
  name: kb-bench-cni
  namespace: kube-system
data:
  cni: bridge (/etc/cni/net.d/10-bridge.conflist)
EOF
cat >"$fs/kind/manifests/default-storage.yaml" <<'EOF'
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
EOF
# systemd trimmed and enabled as kind's base image does.
find "$fs/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
rm -f "$fs"/lib/systemd/system/multi-user.target.wants/* "$fs"/etc/systemd/system/*.wants/* \
  "$fs"/lib/systemd/system/local-fs.target.wants/* "$fs"/lib/systemd/system/sockets.target.wants/*udev* \
  "$fs"/lib/systemd/system/sockets.target.wants/*initctl* "$fs"/lib/systemd/system/basic.target.wants/*
echo "ReadKMsg=no" >>"$fs/etc/systemd/journald.conf"
ln -sf /usr/lib/systemd/systemd "$fs/sbin/init"
chroot "$fs" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
chroot "$fs" systemctl mask systemd-binfmt.service >/dev/null 2>&1

# Preload the component images into the node's containerd, as kind's own
# node-image build does: a throwaway containerd rooted at the image's
# /var/lib/containerd, CRI off, content imported without unpacking.
say "preloading ${#kimages[@]} images into the node's containerd"
mkdir -p "$fs/var/lib/containerd" "$work/cstate"
cat >"$work/containerd.toml" <<EOF
version = 2
root = "$fs/var/lib/containerd"
state = "$work/cstate"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$work/cstate/c.sock"
EOF
containerd --config "$work/containerd.toml" >"$work/containerd.log" 2>&1 &
cpid=$!
for _ in $(seq 1 30); do
  ctr --address "$work/cstate/c.sock" version >/dev/null 2>&1 && break
  sleep 1
done
for a in "$work"/archives/*.tar; do
  ctr --address "$work/cstate/c.sock" -n k8s.io images import --no-unpack --all-platforms --digests "$a" >/dev/null
done
kill "$cpid"
wait "$cpid" 2>/dev/null || true
cpid=
rm -rf "$fs/var/lib/containerd/io.containerd.runtime"* "$fs/var/lib/containerd/tmpmounts"

node_ref="kb-bench/node:$KUBE_VERSION-$hash"
tar -C "$fs" -c . | docker import -c "LABEL $label=image" -c 'ENV container=docker' \
  -c 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' - "$node_ref-base" >/dev/null
# docker import refuses STOPSIGNAL SIGRTMIN+3; a one-line build adds it.
mkdir -p "$work/stop"
printf 'FROM %s\nSTOPSIGNAL SIGRTMIN+3\n' "$node_ref-base" >"$work/stop/Dockerfile"
docker build -q -t "$node_ref" --label "$label=image" "$work/stop" >/dev/null
docker rmi "$node_ref-base" >/dev/null
rm -rf "$fs"

# --- the registry and the workload ---
say "registry $REGISTRY_VERSION and workload images"
registry_ref="kb-bench/registry:$REGISTRY_VERSION-$hash"
d="$work/img-registry"
mkdir -p "$d/etc/distribution" "$d/var/lib/registry" "$d/tmp"
cp "$bin/registry" "$d/registry"
cat >"$d/etc/distribution/config.yml" <<'EOF'
version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: /var/lib/registry
  delete:
    enabled: true
http:
  addr: :5000
EOF
import_image "$d" "$registry_ref" 'ENTRYPOINT ["/registry"]' 'CMD ["serve", "/etc/distribution/config.yml"]' 'EXPOSE 5000'
workload_ref="kb-bench/workload:1.0.0-$hash"
d="$work/img-workload"
mkdir -p "$d/tmp"
cp "$bin/workload" "$d/workload"
import_image "$d" "$workload_ref" 'ENTRYPOINT ["/workload"]' 'EXPOSE 8080'

say "saving archives into $out"
# One command a line: under errexit a failure before && does not stop the
# script, and a save that failed (a full disk) left images.env written
# over a missing node.tar, a cache that failed every later run.
for a in node:"$node_ref" registry:"$registry_ref" workload:"$workload_ref"; do
  docker save "${a#*:}" -o "$out/${a%%:*}.tar.tmp"
  mv "$out/${a%%:*}.tar.tmp" "$out/${a%%:*}.tar"
done
id_of() { docker image inspect --format '{{.Id}}' "$1"; }
t_end=$(date +%s)
cat >"$out/images.env.tmp" <<EOF
# kubectl-bundle bench images ($hash): docker load -i each archive beside this file.
KB_BENCH_IMAGES=$out
KB_KUBE_VERSION=$KUBE_VERSION
KB_NODE_IMAGE=$node_ref
KB_NODE_IMAGE_ID=$(id_of "$node_ref")
KB_REGISTRY_IMAGE=$registry_ref
KB_REGISTRY_IMAGE_ID=$(id_of "$registry_ref")
KB_WORKLOAD_IMAGE=$workload_ref
KB_WORKLOAD_IMAGE_ID=$(id_of "$workload_ref")
# build seconds: binaries $((t_bin - t0)), root filesystem $((t_rootfs - t_bin)), images $((t_end - t_rootfs))
EOF
mv "$out/images.env.tmp" "$out/images.env"
say "done in $((t_end - t0)) s (root filesystem $((t_rootfs - t0)) s, binaries $((t_bin - t_rootfs)) s, images $((t_end - t_bin)) s)"
echo "$out/images.env"
