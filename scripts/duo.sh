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
# - a dune workspace holding irmin 3.7.2 and its vendored libraries, copied
#   from $IRMIN_SRC (the irmin-src directory of
#   ../shared/irmin-bench/irmin-src.tar.gz, or one made by its unpack.sh;
#   when IRMIN_SRC is unset, that tarball is unpacked into $DUO_BUILD),
#   irmin's own trace reader (bench/irmin-pack/trace_common.ml and
#   trace_definitions.ml, unmodified) as the library irmin_trace_defs, and
#   this checkout's ocaml/pando, ocaml/pando_context and ocaml/duo
#   (symbolic links);
# - the Rust side of the binding (cargo, through ocaml/pando/rust-lib.sh).
# Nothing from irmin's sources enters the checkout.
#
# Needs Debian's OCaml 4.13.1, dune 2.9.3 and the OCaml packages that
# ../shared/irmin-bench/README.md lists.
#
# Options of this script (before the trace):
#   --selftest   build and run irmin against irmin instead (the duo's
#                machinery checked on itself; DUO_INJECT=N makes the second
#                store write a different value at the Nth Add)
#   --build-only build, print the executable's path, do not run
# Every other option goes to the duo (duo.exe --help): --max-blocks N,
# --gc-every N --gc-keep K, --only irmin|pando|null, --json FILE,
# --api context|raw, --proofs N, --extra N, --dir DIR, --keep,
# --progress N.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${DUO_BUILD:-$root/target/duo}
shared=${SHARED:-$root/../shared}
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
  sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi

mkdir -p "$build"
build=$(cd "$build" && pwd)

# irmin's sources
if [ -z "${IRMIN_SRC:-}" ]; then
  tarball=$shared/irmin-bench/irmin-src.tar.gz
  if [ ! -d "$build/irmin-src" ]; then
    [ -f "$tarball" ] || { echo "duo.sh: set IRMIN_SRC (no $tarball)" >&2; exit 2; }
    echo "duo.sh: unpacking $tarball" >&2
    tar xzf "$tarball" -C "$build"
  fi
  IRMIN_SRC=$build/irmin-src
fi
src=$(cd "$IRMIN_SRC" && pwd)
[ -f "$src/irmin/src/irmin-tezos/schema.ml" ] || { echo "duo.sh: $src is not irmin-src" >&2; exit 2; }

# the workspace: irmin (the libraries used), vendored libraries, the trace
# reader, and ocaml/ (copied again only when IRMIN_SRC changes)
ws=$build/ws
if [ "$(cat "$ws/.irmin-src" 2>/dev/null)" != "$src" ]; then
  echo "duo.sh: assembling the workspace in $ws from $src" >&2
  rm -rf "$ws/irmin" "$ws/vendor"
  mkdir -p "$ws/irmin/src" "$ws/vendor"
  cp "$src/irmin/dune-project" "$src"/irmin/*.opam "$ws/irmin/"
  for d in irmin ppx_irmin irmin-pack irmin-tezos; do
    cp -r "$src/irmin/src/$d" "$ws/irmin/src/$d"
  done
  for lib in repr index digestif optint checkseum progress semaphore-compat lru \
             psq rusage bheap either vector tezos-base58; do
    cp -r "$src/$lib" "$ws/vendor/$lib"
    for sub in test bench fuzz examples docs mirage bin; do rm -rf "$ws/vendor/$lib/$sub"; done
  done
  rm -f "$ws/vendor/bheap/test.ml" "$ws/vendor/vector/test.ml"
  for lib in bheap vector; do sed -i '/(test\b/,$d' "$ws/vendor/$lib/dune"; done
  echo "$src" > "$ws/.irmin-src"
fi
mkdir -p "$ws/irmin_trace"
cp "$src/irmin/bench/irmin-pack/trace_common.ml" \
   "$src/irmin/bench/irmin-pack/trace_definitions.ml" "$ws/irmin_trace/"
cat > "$ws/irmin_trace/dune" <<'EOD'
; irmin 3.7.2's IrmRepBT reader (bench/irmin-pack/), copied by scripts/duo.sh
(library
 (name irmin_trace_defs)
 (wrapped false)
 (modules trace_common trace_definitions)
 (libraries repr fmt)
 (preprocess
  (pps ppx_repr ppx_deriving.enum)))
EOD
printf '(lang dune 2.9)\n(profile duo)\n' > "$ws/dune-workspace"
# the package that ocaml/pando and ocaml/pando_context's public names
# (pando, pando.context) belong to, as ocaml/dune-project declares it
printf '(lang dune 2.9)\n(package (name pando))\n' > "$ws/dune-project"
# the binding's libraries and the duo, linked one by one so that they
# belong to this workspace's project (a library without a public name,
# as irmin_trace_defs, is seen only inside its own project)
[ -L "$ws/ocaml" ] && rm "$ws/ocaml"
mkdir -p "$ws/ocaml"
for d in pando pando_context duo; do ln -sfn "$root/ocaml/$d" "$ws/ocaml/$d"; done

# the Rust side of the binding: ocaml/pando's dune rule builds it with
# cargo (ocaml/pando/rust-lib.sh), from this checkout even when the
# workspace is elsewhere
export PANDO_ROOT=$root

target=./ocaml/duo/$exe.exe

(cd "$ws" && dune build -j "${JOBS:-2}" "$target")
bin=$ws/_build/default/${target#./}
if [ $build_only = 1 ]; then echo "$bin"; exit 0; fi
exec "$bin" "$@"
