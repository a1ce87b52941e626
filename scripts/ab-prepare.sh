#!/usr/bin/env bash
# Exports the source trees of several commits into .ab/ (git-ignored) for scripts/ab-run.sh, an A/B
# of two or more commits on one GPU in one device call: carry ".ab" with the call. The first ref is
# the baseline the others are compared with. Usage: scripts/ab-prepare.sh main my-branch~1 my-branch
set -euo pipefail
cd "$(dirname "$0")/.."
(($# >= 2)) || { echo "usage: $0 base-ref other-ref [more refs]" >&2; exit 2; }
rm -rf .ab
mkdir -p .ab
i=0
for ref in "$@"; do
  name="$i-$(printf %s "$ref" | tr -c 'A-Za-z0-9._-' '_' | cut -c1-40)"
  mkdir -p ".ab/$name"
  git archive "$ref" | tar -x -C ".ab/$name"
  echo "$name $(git rev-parse --short "$ref")" >>.ab/trees.txt
  i=$((i + 1))
done
# AB_PREBUILD="b12x_cli b12x_gpu_test_linear" (CMake targets): builds them here for every tree and
# puts the executables into .ab/bin/<tree>/, which ab-run.sh then runs instead of building on the
# device (minutes of device time; the kernels are compiled by NVRTC there anyway). The trees are built
# one after another in ONE source and build directory (/tmp/ab-src, /tmp/ab-build, kept for the next
# time): each tree's files are copied over the previous one's only where their content differs, so
# ninja recompiles only what the trees change (trees of a few commits: one full build, then seconds).
sync_tree() {  # $1 -> $2: copy the files whose content differs, delete those $1 lacks
  local f
  while IFS= read -r -d '' f; do
    if ! cmp -s "$1/$f" "$2/$f"; then mkdir -p "$2/$(dirname "$f")" && cp "$1/$f" "$2/$f"; fi
  done < <(cd "$1" && find . -type f -print0)
  while IFS= read -r -d '' f; do
    [[ -e "$1/$f" ]] || rm -f "$2/$f"
  done < <(cd "$2" && find . -type f -print0)
}
if [[ -n "${AB_PREBUILD:-}" ]]; then
  src=/tmp/ab-src b=/tmp/ab-build
  mkdir -p "$src"
  while read -r name _; do
    start=$SECONDS
    sync_tree ".ab/$name" "$src"
    cmake -S "$src" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DB12X_TORCH=OFF >/dev/null
    cmake --build "$b" -j "$(nproc)" --target $AB_PREBUILD >/dev/null
    mkdir -p ".ab/bin/$name"
    for target in $AB_PREBUILD; do
      exe="$b/${target%_cli}"  # (b12x_cli builds the executable b12x)
      [[ -x "$exe" ]] || exe="$b/tests/$target"
      strip -o ".ab/bin/$name/$(basename "$exe")" "$exe"  # (60 MB of debug info would not travel)
    done
    echo "$name built in $((SECONDS - start)) s"
  done <.ab/trees.txt
fi
cat .ab/trees.txt
echo ".ab: $(du -sh .ab | cut -f1) (carry it; the device call's carried paths hold at most 64 MiB)"
