#!/usr/bin/env bash
# Benchmarks kubectl-bundle-verify against zarf package verify and a single
# openssl sha256 pass (the floor) on a package of incompressible data built
# and signed by the real zarf. Prints the median wall time and peak RSS of
# each, and the ratios the goals are written in, all from one run.
#
#   BENCH_SIZES_MB  package payload sizes in MB (default 1024; "1024 4096" adds the 4 GB case)
#   BENCH_RUNS      runs per tool (default 3)
#   BENCH_DIR       where packages are built and kept between runs (default hack/bench/out)
set -o errexit -o nounset -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
zarf="${ZARF:-$root/bin/testbin/zarf}"
verify="$root/bin/kubectl-bundle-verify"
sizes="${BENCH_SIZES_MB:-1024}"
runs="${BENCH_RUNS:-3}"
work="${BENCH_DIR:-$root/hack/bench/out}"
key="$root/testdata/keys/cosign.key"
pub="$root/testdata/keys/cosign.pub"
mkdir -p "$work"
[[ -x "$zarf" ]] || { echo "zarf not found at $zarf: run make testbin" >&2; exit 3; }
[[ -x "$verify" ]] || { echo "$verify not built: run make build" >&2; exit 3; }
command -v openssl >/dev/null || { echo "openssl is required" >&2; exit 3; }
go build -o "$work/measure" "$root/hack/bench/measure"

build_package() { # SIZE_MB -> path of the package
  local mb="$1" dir="$work/pkg-$1"
  local pkg="$dir/out/zarf-package-bench-amd64-$mb.0.0.tar.zst"
  if [[ ! -f "$pkg" ]]; then
    rm -rf "$dir" && mkdir -p "$dir/src" "$dir/out"
    echo "building a $mb MB package with zarf (once; kept in $dir)" >&2
    head -c "$((mb * 1000 * 1000))" /dev/urandom >"$dir/src/payload.bin"
    cat >"$dir/src/zarf.yaml" <<YAML
kind: ZarfPackageConfig
metadata:
  name: bench
  version: $mb.0.0
components:
  - name: payload
    required: true
    files:
      - source: payload.bin
        target: /opt/payload.bin
YAML
    "$zarf" package create "$dir/src" --confirm -a amd64 -o "$dir/out" --no-color --log-level warn \
      --signing-key "$key" --signing-key-pass testpass --tmpdir "$dir" --cache "$dir/cache" >&2
    rm -f "$dir/src/payload.bin"
  fi
  echo "$pkg"
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

run_tool() { # NAME CMD... -> "name wall rss"
  local name="$1"
  shift
  local walls=() rsss=() out
  for ((i = 0; i < runs; i++)); do
    rm -rf "$work/state" "$work/zarf-tmp" "$work/copy.bin" && mkdir -p "$work/zarf-tmp"
    out="$("$work/measure" "$@")"
    read -r wall rss code <<<"$out"
    [[ "$code" == 0 ]] || { echo "$name exited $code" >&2; exit 1; }
    walls+=("$wall")
    rsss+=("$rss")
  done
  echo "$name $(printf '%s\n' "${walls[@]}" | median) $(printf '%s\n' "${rsss[@]}" | sort -n | tail -1)"
}

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "go: $(go version | cut -d' ' -f3), zarf: $("$zarf" version 2>/dev/null), runs per tool: $runs (median wall, max RSS)"
for mb in $sizes; do
  pkg="$(build_package "$mb")"
  bytes="$(stat -c %s "$pkg")"
  cat "$pkg" >/dev/null # warm the page cache for every tool alike
  echo
  echo "package: $(basename "$pkg"), $bytes bytes"
  results="$(
    run_tool openssl openssl dgst -sha256 "$pkg"
    run_tool kubectl-bundle-verify "$verify" -q "$pkg" --key "$pub"
    run_tool "kubectl-bundle-verify --stage" "$verify" -q --stage --state-dir "$work/state" "$pkg" --key "$pub"
    run_tool "copy + fsync (disk floor)" dd if="$pkg" of="$work/copy.bin" bs=1M conv=fsync status=none
    run_tool "zarf package verify" "$zarf" package verify "$pkg" --key "$pub" --no-color --log-level warn --tmpdir "$work/zarf-tmp"
  )"
  base="$(awk '$1=="openssl" {print $2}' <<<"$results")"
  zarfw="$(awk '/^zarf package verify/ {print $(NF-1)}' <<<"$results")"
  printf '| %-30s | %8s | %9s | %8s | %10s |\n' tool "wall s" "x openssl" "x zarf" "peak RSS"
  printf '|%s|%s|%s|%s|%s|\n' "--------------------------------" "----------" "-----------" "----------" "------------"
  while read -r line; do
    rss="${line##* }"
    rest="${line% *}"
    wall="${rest##* }"
    name="${rest% *}"
    printf '| %-30s | %8.2f | %8.2fx | %7.2fx | %6.1f MiB |\n' "$name" "$wall" \
      "$(awk -v a="$wall" -v b="$base" 'BEGIN {print a/b}')" \
      "$(awk -v a="$wall" -v b="$zarfw" 'BEGIN {print a/b}')" \
      "$(awk -v r="$rss" 'BEGIN {print r/1024}')"
  done <<<"$results"
  rm -f "$work/copy.bin"
done
