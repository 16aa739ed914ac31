# irmin-src.sh: where irmin 3.7.2 comes from, for every script that builds
# against it (bench/irmin/build.sh, scripts/duo.sh, scripts/duo-speed.sh,
# scripts/side-by-side.sh, .ci/run). Sourced, not run:
#
#   . bench/irmin/irmin-src.sh
#   irmin_src ROOT || exit 1      # sets IRMIN_FROM, and IRMIN_SRC for "src"
#   irmin_workspace WS            # puts irmin's libraries into dune workspace WS
#
# The first of these is used:
# 1. an opam switch (findlib) where `irmin-pack` and `irmin-tezos` are both
#    version 3.7.2: IRMIN_FROM=opam, and dune builds against those
#    installed libraries (irmin_workspace copies nothing);
# 2. $IRMIN_SRC, irmin 3.7.2's sources with its 14 vendored libraries as
#    unpack.sh lays them out: IRMIN_FROM=src;
# 3. ../shared/irmin-bench/irmin-src.tar.gz beside the checkout, where it
#    exists (the project's own machines), unpacked once into
#    ROOT/target/irmin-src: IRMIN_FROM=src.
# With none, irmin_src prints one line saying what to install and returns 1.
#
# irmin's own IrmRepBT reader, trace_common.ml and trace_definitions.ml of
# irmin 3.7.2's bench/irmin-pack/ (ISC licence, unmodified), is kept in
# driver/traces/: an opam switch does not install it. irmin_workspace
# checks it against IRMIN_SRC's copy when there is one.
#
# irmin_src also sets IRMIN_ID, a word that changes when the sources do (a
# workspace is assembled again when it changes).

IRMIN_BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

irmin_src() { # irmin_src ROOT
  local root=$1 v_pack v_tezos tarball
  if command -v ocamlfind >/dev/null 2>&1; then
    v_pack=$(ocamlfind query -format '%v' irmin-pack 2>/dev/null || true)
    v_tezos=$(ocamlfind query -format '%v' irmin-tezos 2>/dev/null || true)
    if [ "$v_pack" = 3.7.2 ] && [ "$v_tezos" = 3.7.2 ]; then
      if [ -n "${IRMIN_SRC:-}" ]; then
        echo "irmin 3.7.2 from the installed libraries (findlib), not IRMIN_SRC" >&2
      fi
      IRMIN_FROM=opam
      IRMIN_ID="opam:$(ocamlfind query irmin-pack)"
      return 0
    fi
  fi
  if [ -z "${IRMIN_SRC:-}" ]; then
    tarball=$root/../shared/irmin-bench/irmin-src.tar.gz
    if [ -f "$tarball" ]; then
      # Unpacked beside, then renamed: an interrupted unpack (or two
      # scripts at once) never leaves a partial target/irmin-src.
      if [ ! -d "$root/target/irmin-src" ]; then
        echo "unpacking $tarball into target/" >&2
        local unpacking
        mkdir -p "$root/target" && unpacking=$(mktemp -d "$root/target/.irmin-src.XXXXXX") \
          && tar xzf "$tarball" -C "$unpacking" \
          && { mv -T "$unpacking/irmin-src" "$root/target/irmin-src" 2>/dev/null \
               || [ -d "$root/target/irmin-src" ]; } \
          || { rm -rf "${unpacking:-}"; echo "cannot unpack $tarball" >&2; return 1; }
        rm -rf "$unpacking"
      fi
      IRMIN_SRC=$root/target/irmin-src
    fi
  fi
  if [ -z "${IRMIN_SRC:-}" ]; then
    echo "irmin 3.7.2 not found: install irmin-pack.3.7.2 and irmin-tezos.3.7.2 with opam, or set IRMIN_SRC to irmin 3.7.2's sources (see bench/irmin/README.md)" >&2
    return 1
  fi
  if [ ! -f "$IRMIN_SRC/irmin/src/irmin-tezos/schema.ml" ] || [ ! -d "$IRMIN_SRC/repr" ]; then
    echo "IRMIN_SRC=$IRMIN_SRC is not irmin 3.7.2's sources as bench/irmin/unpack.sh lays them out (irmin/, repr/, index/, ...; see bench/irmin/README.md)" >&2
    return 1
  fi
  IRMIN_SRC=$(cd "$IRMIN_SRC" && pwd)
  IRMIN_FROM=src
  IRMIN_ID="src:$IRMIN_SRC"
  export IRMIN_SRC
}

# The libraries irmin vendors that Debian lacks (each directory of
# IRMIN_SRC is also the name of its opam package).
IRMIN_VENDORED="repr index digestif optint checkseum progress semaphore-compat lru
  psq rusage bheap either vector tezos-base58"

# irmin_workspace WS, after irmin_src: from sources, irmin's libraries that
# the driver and the duo link and the vendored ones, without their tests,
# benchmarks and examples; from an installed irmin, nothing.
irmin_workspace() {
  local ws=$1 d lib sub f
  rm -rf "$ws/irmin" "$ws/vendor"
  [ "$IRMIN_FROM" = src ] || return 0
  for f in trace_common.ml trace_definitions.ml; do
    if ! cmp -s "$IRMIN_BENCH/driver/traces/$f" "$IRMIN_SRC/irmin/bench/irmin-pack/$f"; then
      echo "bench/irmin/driver/traces/$f differs from $IRMIN_SRC/irmin/bench/irmin-pack/$f" >&2
      return 1
    fi
  done
  mkdir -p "$ws/irmin/src" "$ws/vendor"
  cp "$IRMIN_SRC/irmin/dune-project" "$IRMIN_SRC"/irmin/*.opam "$ws/irmin/"
  for d in irmin ppx_irmin irmin-pack irmin-tezos; do
    cp -r "$IRMIN_SRC/irmin/src/$d" "$ws/irmin/src/$d"
  done
  for lib in $IRMIN_VENDORED; do
    cp -r "$IRMIN_SRC/$lib" "$ws/vendor/$lib"
    for sub in test bench fuzz examples docs mirage bin; do rm -rf "$ws/vendor/$lib/$sub"; done
  done
  # bheap and vector build a test.ml from their root dune file
  rm -f "$ws/vendor/bheap/test.ml" "$ws/vendor/vector/test.ml"
  for lib in bheap vector; do sed -i '/(test\b/,$d' "$ws/vendor/$lib/dune"; done
}
