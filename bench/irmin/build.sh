#!/usr/bin/env bash
# build.sh [BUILD_DIR]
#
# Builds bench.exe, irmin-pack 3.7.2's trace-replay driver (driver/), in
# BUILD_DIR (default target/irmin-bench of this checkout), against irmin
# 3.7.2 from where irmin-src.sh finds it: an opam switch's installed
# libraries, $IRMIN_SRC, or the tarball beside the checkout. Its last line
# is the path of bench.exe. Nothing is written into the checkout's tracked
# files. JOBS=N sets dune's -j (default 2).
#
# Built from sources, it needs Debian bookworm's OCaml 4.13.1, dune 2.9.3
# and the packages README.md lists (scripts/ocaml-deps.sh installs them).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/target/irmin-bench}
. "$here/irmin-src.sh"
irmin_src "$root" || exit 1
mkdir -p "$build"
build=$(cd "$build" && pwd)

# the workspace: irmin's libraries (from sources only), the driver and
# irmin's trace reader (driver/traces/)
if [ "$(cat "$build/.irmin-id" 2>/dev/null)" != "$IRMIN_ID" ]; then
  echo "build.sh: assembling the workspace in $build (irmin from $IRMIN_ID)" >&2
  irmin_workspace "$build"
  echo "$IRMIN_ID" > "$build/.irmin-id"
fi
rm -rf "$build/driver"
cp -r "$here/driver" "$build/driver"
printf '(lang dune 2.9)\n(profile release)\n' > "$build/dune-workspace"

(cd "$build" && dune build -j "${JOBS:-2}" ./driver/bench.exe)
echo "$build/_build/default/driver/bench.exe"
