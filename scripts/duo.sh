#!/usr/bin/env bash
# duo.sh TRACE [--max-blocks N] [--gc-every N --gc-keep K] [other duo options]
#
# Replays an IrmRepBT trace on irmin-pack 3.7.2 and on pando (through the
# OCaml binding's Pando_context) in one process and compares every result
# (ocaml/duo/duo_core.ml says which). Its last line is
#   duo: B blocks, O results compared, D divergences
# and it exits 0 exactly when D is 0.
#
# It builds what it needs first, in $DUO_BUILD (default target/duo):
# - a dune workspace holding irmin 3.7.2 as bench/irmin/irmin-src.sh finds
#   it (an opam switch's installed irmin-pack and irmin-tezos 3.7.2, used
#   as they are; or the sources in $IRMIN_SRC, or in the tarball beside the
#   checkout, copied with their vendored libraries), irmin's own trace
#   reader (bench/irmin/driver/traces/) as the library irmin_trace_defs,
#   and this checkout's ocaml/pando, ocaml/pando_context and ocaml/duo
#   (symbolic links);
# - the Rust side of the binding (cargo, through ocaml/pando/rust-lib.sh).
# Nothing is written into the checkout's tracked files.
#
# Needs OCaml 4.13.1 and dune 2.9.3 (Debian's, with the packages
# scripts/ocaml-deps.sh installs, when irmin is built from sources).
#
# Options of this script (before the trace):
#   --selftest   build and run irmin against irmin instead (the duo's
#                machinery checked on itself; DUO_INJECT=N makes the second
#                store write a different value at the Nth Add)
#   --build-only build, print the executable's path, do not run
# Every other option goes to the duo (duo.exe --help): --max-blocks N,
# --gc-every N --gc-keep K, --only irmin|pando|null, --json FILE,
# --api context|raw, --proofs N, --extra N, --dir DIR, --keep,
# --progress N, --trace-under-data.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${DUO_BUILD:-$root/target/duo}
exe=duo
build_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --selftest) exe=duo_selftest; shift ;;
    --build-only) build_only=1; shift ;;
    *) break ;;
  esac
done
if [ $build_only = 0 ] && [ $# -lt 1 ]; then
  sed -n "2,/^set -euo/p" "$0" | sed "\$d; s/^# \\{0,1\\}//"
  exit 2
fi

# irmin 3.7.2, and the workspace: irmin's libraries (from sources only)
# and the trace reader (copied again only when irmin's origin changes)
. "$root/bench/irmin/irmin-src.sh"
irmin_src "$root" || exit 2
mkdir -p "$build"
build=$(cd "$build" && pwd)
ws=$build/ws
if [ "$(cat "$ws/.irmin-id" 2>/dev/null)" != "$IRMIN_ID" ]; then
  echo "duo.sh: assembling the workspace in $ws (irmin from $IRMIN_ID)" >&2
  mkdir -p "$ws"
  irmin_workspace "$ws"
  echo "$IRMIN_ID" > "$ws/.irmin-id"
fi
rm -rf "$ws/irmin_trace"
cp -r "$root/bench/irmin/driver/traces" "$ws/irmin_trace"
printf '(lang dune 2.9)\n(profile duo)\n' > "$ws/dune-workspace"
# the package that ocaml/pando and ocaml/pando_context's public names
# (pando, pando.context) belong to, as ocaml/dune-project declares it
printf '(lang dune 2.9)\n(package (name pando))\n' > "$ws/dune-project"
# the binding's libraries and the duo, linked one by one so that they
# belong to this workspace's project (a library without a public name,
# as irmin_trace_defs, is seen only inside its own project)
[ -L "$ws/ocaml" ] && rm "$ws/ocaml"
mkdir -p "$ws/ocaml"
for d in pando pando_context edges duo; do ln -sfn "$root/ocaml/$d" "$ws/ocaml/$d"; done

# the Rust side of the binding: ocaml/pando's dune rule builds it with
# cargo (ocaml/pando/rust-lib.sh), from this checkout even when the
# workspace is elsewhere
export PANDO_ROOT=$root

target=./ocaml/duo/$exe.exe

(cd "$ws" && dune build -j "${JOBS:-2}" "$target")
bin=$ws/_build/default/${target#./}
if [ $build_only = 1 ]; then echo "$bin"; exit 0; fi
exec "$bin" "$@"
