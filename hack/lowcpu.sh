#!/usr/bin/env bash
# lowcpu.sh CMD...: run CMD (and everything it starts) at a lower CPU weight
# than the kind clusters beside it.
#
# make test runs e2e-kind-core beside go test. On 2 cores the go tests (up
# to 4 e2e tests at once, each with its API servers and plugin processes)
# took so much of the machine that a kind node's control plane lost its
# leader elections, CoreDNS never got ready and zarf's agent failed its
# liveness probes until zarf init's timeout: the kind part failed on a
# machine that was merely busy. Nice does not help (each session is an
# autogroup of its own, and the nodes run under Docker's cgroup), so CMD
# runs in a cgroup of its own, kubectl-bundle-tests, whose CPU weight is a
# quarter of a default cgroup's (KB_TESTS_CPU_SHARES, cgroup v1 cpu.shares;
# cgroup v2 cpu.weight gets the same fraction): when both want the cores,
# the kind nodes (Docker's cgroup, the default weight) get about 4/5 of
# them, and when the nodes idle the tests get all of it. The weight only
# orders who waits; it caps nothing. The kind part's image build joins the
# same cgroup (hack/e2e-kind.sh), so on a cold machine the images and the
# go tests share it as before, the images at nice 10.
#
# Where no cgroup can be made (not root, no writable cpu controller), CMD
# runs as it is and this says so.
set -o errexit -o nounset -o pipefail

shares=${KB_TESTS_CPU_SHARES:-256}
name=kubectl-bundle-tests
[ $# -gt 0 ] || {
  echo "usage: hack/lowcpu.sh CMD..." >&2
  exit 2
}

join() { # $1: the cgroup directory, $2: the weight file, $3: the weight
  mkdir -p "$1" 2>/dev/null && echo "$3" >"$1/$2" 2>/dev/null && echo $$ >"$1/cgroup.procs" 2>/dev/null
}

v1=/sys/fs/cgroup/cpu
v2=/sys/fs/cgroup
weight=$((shares * 100 / 1024 > 0 ? shares * 100 / 1024 : 1)) # cgroup v2's scale: 100 is the default
if [ -f "$v1/cpu.shares" ] && [ -w "$v1" ] && join "$v1/$name" cpu.shares "$shares"; then
  echo "lowcpu: $* runs in cgroup $v1/$name (cpu.shares $shares; the kind nodes have 1024)" >&2
elif [ -f "$v2/cgroup.controllers" ] && grep -qw cpu "$v2/cgroup.controllers" && [ -w "$v2" ] &&
  { grep -qw cpu "$v2/cgroup.subtree_control" || echo +cpu >"$v2/cgroup.subtree_control"; } 2>/dev/null &&
  join "$v2/$name" cpu.weight "$weight"; then
  echo "lowcpu: $* runs in cgroup $v2/$name (cpu.weight $weight; the kind nodes have 100)" >&2
else
  echo "lowcpu: no cgroup of our own here (not root or no writable cpu controller): $* runs at the default weight" >&2
fi
exec "$@"
