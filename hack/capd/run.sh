#!/usr/bin/env bash
# run.sh: the CAPD experiments of issue 29 (make e2e-kind-capd), each a
# script of its own that prints its numbers; this runs them in order under
# the Docker engine hack/docker/ensure.sh gives (make's recipe runs it so),
# keeps each one's output in bin/capd/<name>.log and prints a summary.
#
#   hack/docker/ensure.sh run hack/capd/run.sh [EXPERIMENT...]   # default: all
#
# The images come first (hack/images/build.sh, hack/images/capi.sh, both
# cached by pin hash, built at low CPU weight), so a cold machine builds
# them once for every experiment; pivot builds the older Cluster API of
# hack/tools/capi-v1.13 itself, while its slot a comes up.
set -o errexit -o nounset -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${KB_CAPD_WORK:-$root/bin/capd}
mkdir -p "$out"
all=(survival replace s2 pivot recreate)
[ $# -gt 0 ] || set -- "${all[@]}"
if [ -z "${KB_IMAGES_ENV:-}" ]; then
  KB_IMAGES_ENV=$("$root/hack/lowcpu.sh" nice -n 19 "$root/hack/images/build.sh")
  export KB_IMAGES_ENV
fi
if [ -z "${KB_CAPI_ENV:-}" ]; then
  KB_CAPI_ENV=$("$root/hack/lowcpu.sh" "$root/hack/images/capi.sh")
  export KB_CAPI_ENV
fi
rc=0
for e in "$@"; do
  [ -x "$here/$e.sh" ] || {
    echo "capd: no experiment $e (have: ${all[*]})" >&2
    exit 2
  }
  echo "=== capd experiment $e (log: $out/$e.log)"
  if KB_CAPD_WORK="$out/$e" "$here/$e.sh" >"$out/$e.out" 2>"$out/$e.log"; then
    cat "$out/$e.out"
    echo "=== $e: ran"
  else
    erc=$?
    cat "$out/$e.out"
    echo "=== $e: FAILED (exit $erc); the end of its log:"
    tail -40 "$out/$e.log"
    rc=1
  fi
done
exit $rc
