#!/usr/bin/env bash
# ensure.sh: a Docker engine that can run privileged containers (kind's
# nodes are privileged), for the real-Docker bench.
#
#   hack/docker/ensure.sh start        # prints DOCKER_HOST=... on stdout
#   hack/docker/ensure.sh run CMD...   # start, run CMD with DOCKER_HOST set, stop what it started
#   hack/docker/ensure.sh stop         # stop the daemon this script started (if any)
#   hack/docker/ensure.sh restart      # stop and start the daemon this script started (a host reboot, as the bench can make one)
#   hack/docker/ensure.sh status
#
# Order: a running engine ($DOCKER_HOST, else the default socket) that can
# run `--privileged` is used as it is. Else, with no engine running, Debian's
# docker.io is installed if dockerd is missing and a daemon of our own is
# started: its own socket, data root and exec root under the cache dir
# ($KUBECTL_BUNDLE_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/kubectl-bundle),
# and, only where `--privileged` fails (a capability bounding set without
# CAP_SYS_RESOURCE), the capability wrapper hack/docker/runcwrap registered
# as its default runtime. The configuration of a daemon this script did not
# start is never changed; the only objects it creates are the probe image
# kb-bench/probe (label dev.kubectl-bundle.bench) and its short-lived probe
# containers (name prefix kb-bench-probe-). A daemon of its own that it
# starts is cleared of the containers a killed earlier run left in it
# (clear_leftovers).
set -o errexit -o nounset -o pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cache=${KUBECTL_BUNDLE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-bundle}
dir="$cache/docker"
sock="$dir/docker.sock"
own_host="unix://$sock"
label=dev.kubectl-bundle.bench
GO=${GO:-go}

say() { echo "docker: $*" >&2; }
die() {
  say "$*"
  exit 3
}

reachable() { DOCKER_HOST=$1 docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

# probe_image builds kb-bench/probe (the pause program, static) into the
# engine at $1 unless it is there.
probe_image() {
  local host=$1
  if DOCKER_HOST=$host docker image inspect kb-bench/probe:1 >/dev/null 2>&1; then
    return 0
  fi
  local tmp
  tmp=$(mktemp -d)
  (cd "$root" && CGO_ENABLED=0 "$GO" build -trimpath -o "$tmp/rootfs/pause" ./hack/images/pause)
  tar -C "$tmp/rootfs" -c . | DOCKER_HOST=$host docker import -c "LABEL $label=probe" -c 'ENTRYPOINT ["/pause"]' - kb-bench/probe:1 >/dev/null
  rm -rf "$tmp"
}

# privileged reports whether the engine at $1 runs a privileged container.
privileged() {
  local host=$1 out
  probe_image "$host"
  if out=$(DOCKER_HOST=$host docker run --rm --privileged --name "kb-bench-probe-$$" --label "$label=probe" kb-bench/probe:1 -v 2>&1); then
    return 0
  fi
  say "--privileged fails on $host: $out"
  return 1
}

own_pid() {
  local pid
  pid=$(cat "$dir/dockerd.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$(command -v dockerd)" ] && echo "$pid"
}

install_docker() {
  command -v dockerd >/dev/null 2>&1 && command -v runc >/dev/null 2>&1 && return 0
  [ "$(id -u)" = 0 ] || die "dockerd is missing and this is not root: install Debian's docker.io (apt-get install docker.io) or start a Docker engine"
  say "installing Debian's docker.io"
  if ! "$root/hack/tools/apt.sh" install -y -qq docker.io >"$dir/apt.log" 2>&1; then
    "$root/hack/tools/apt.sh" update -qq >>"$dir/apt.log" 2>&1 || true
    "$root/hack/tools/apt.sh" install -y -qq docker.io >>"$dir/apt.log" 2>&1 || die "apt-get install docker.io failed (see $dir/apt.log)"
  fi
  command -v dockerd >/dev/null 2>&1 || die "docker.io installed no dockerd"
}

write_config() { # $1: with the wrapper (1) or without (0)
  if [ "$1" = 1 ]; then
    printf '{"runtimes":{"kb-runc":{"path":"%s"}},"default-runtime":"kb-runc"}\n' "$dir/bin/runcwrap" >"$dir/daemon.json"
  else
    echo '{}' >"$dir/daemon.json"
  fi
}

start_own() {
  mkdir -p "$dir/bin"
  install_docker
  [ "$(id -u)" = 0 ] || die "starting a Docker daemon needs root"
  (cd "$root" && CGO_ENABLED=0 "$GO" build -trimpath -o "$dir/bin/runcwrap" ./hack/docker/runcwrap)
  local wrap=0
  [ -f "$dir/wrapped" ] && wrap=1
  write_config "$wrap"
  say "starting dockerd (socket $sock, data root $dir/data)"
  rm -f "$sock"
  # setsid: the daemon outlives this script (stop ends it), in its own group.
  setsid dockerd --host "$own_host" --data-root "$dir/data" --exec-root "$dir/exec" \
    --pidfile "$dir/dockerd.pid" --config-file "$dir/daemon.json" >>"$dir/dockerd.log" 2>&1 </dev/null &
  for _ in $(seq 1 60); do
    reachable "$own_host" && break
    sleep 1
  done
  reachable "$own_host" || die "dockerd did not answer on $sock within 60 s (see $dir/dockerd.log)"
  if ! privileged "$own_host"; then
    [ "$wrap" = 1 ] && die "--privileged fails even with the capability wrapper (see $dir/dockerd.log)"
    say "registering the capability wrapper $dir/bin/runcwrap (drops CAP_SYS_RESOURCE, which this host's bounding set lacks)"
    write_config 1
    touch "$dir/wrapped"
    kill -HUP "$(own_pid)"
    sleep 1
    privileged "$own_host" || die "--privileged fails even with the capability wrapper (see $dir/dockerd.log)"
  fi
}

# clear_leftovers removes the containers an earlier run left in the engine
# of ours that was just started: a run killed before it cleaned up (a
# session's end, a CI timeout) leaves its kind nodes, and the engine starts
# them again by their restart policies, so a bench cluster nobody owns any
# more ran beside the next run's tests (two Cluster API management clusters
# of a killed experiment did, through a whole make test). Only our own
# engine, whose containers are all the bench's, and only when this script
# starts it: restart (the reboot test) keeps them. KB_DOCKER_KEEP=1 keeps
# them too.
clear_leftovers() {
  [ "${KB_DOCKER_KEEP:-}" = 1 ] && return 0
  local names
  names=$(DOCKER_HOST=$own_host docker ps -a --format '{{.Names}}' | grep -v '^kb-bench-probe-' || true)
  [ -n "$names" ] || return 0
  say "removing $(printf '%s\n' "$names" | grep -c .) containers an earlier run left in this engine (KB_DOCKER_KEEP=1 keeps them): $(printf '%s\n' "$names" | paste -sd' ')"
  # shellcheck disable=SC2086 # one name a word
  DOCKER_HOST=$own_host docker rm -f $names >/dev/null
}

# ensure prints the DOCKER_HOST to use.
ensure() {
  mkdir -p "$dir"
  if own_pid >/dev/null && reachable "$own_host"; then
    echo "$own_host"
    return
  fi
  local host=${DOCKER_HOST:-unix:///var/run/docker.sock}
  if reachable "$host"; then
    if privileged "$host"; then
      say "using the running engine at $host"
      echo "$host"
      return
    fi
    die "the running engine at $host cannot run privileged containers and this script does not change a daemon it did not start: register a runtime that drops CAP_SYS_RESOURCE there (see hack/docker/runcwrap), or stop it"
  fi
  start_own
  clear_leftovers
  echo "$own_host"
}

stop_own() {
  local pid
  pid=$(own_pid) || {
    say "no daemon of ours is running"
    return 0
  }
  say "stopping dockerd $pid"
  kill -TERM "$pid"
  for _ in $(seq 1 30); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 1
  done
  if kill -0 "$pid" 2>/dev/null; then
    say "dockerd $pid still running after 30 s; killing it"
    kill -KILL "$pid"
  fi
  rm -f "$dir/dockerd.pid" "$sock"
}

case ${1:-} in
start)
  host=$(ensure)
  echo "DOCKER_HOST=$host"
  ;;
run)
  shift
  [ $# -gt 0 ] || die "usage: ensure.sh run CMD..."
  mkdir -p "$dir"
  had=0
  own_pid >/dev/null && had=1
  host=$(ensure)
  export DOCKER_HOST=$host
  rc=0
  "$@" || rc=$?
  # Stop only what this run started.
  if [ "$had" = 0 ] && own_pid >/dev/null; then
    stop_own
  fi
  exit "$rc"
  ;;
stop) stop_own ;;
restart)
  # Only a daemon of ours: the configuration and the containers of an
  # engine this script did not start are not its to stop.
  own_pid >/dev/null || die "the engine is not one this script started: restart it by its own means (systemctl restart docker, or Docker Desktop's Restart)"
  stop_own
  start_own
  echo "DOCKER_HOST=$own_host"
  ;;
status)
  if pid=$(own_pid); then
    echo "own dockerd $pid on $own_host"
  elif reachable "${DOCKER_HOST:-unix:///var/run/docker.sock}"; then
    echo "engine at ${DOCKER_HOST:-unix:///var/run/docker.sock} (not ours)"
  else
    echo "no engine"
    exit 3
  fi
  ;;
*)
  echo "usage: ensure.sh start|run CMD...|stop|status" >&2
  exit 2
  ;;
esac
