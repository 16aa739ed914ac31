#!/usr/bin/env bash
# OCaml 5.3.0 (Octez's version) built from source, with nothing downloaded
# beyond a package registry: the npm package ocaml@5.3.0 is OCaml 5.3.0's
# source tree (`npm pack` fetches it without running anything).
#
#   scripts/ocaml5.sh [PREFIX]
#
# PREFIX defaults to $HOME/.cache/pando-ocaml-5.3.0. If PREFIX/bin/ocamlopt
# already says 5.3.0 nothing is built. The last line printed (stdout) is the
# prefix, so `prefix=$(scripts/ocaml5.sh | tail -n 1)` works; progress goes
# to stderr. Building takes about 3.5 minutes on 2 cores (JOBS=N, default 2).
#
# Using it (checked with a library with C stubs and a Rust staticlib made
# with the `ocaml` crate 1.3, and a test calling both from two domains):
#   P=$(scripts/ocaml5.sh | tail -n 1)
#   # the Rust side: ocaml-sys and boxroot read OCAMLOPT (and rebuild when
#   # it changes; a change of PATH alone is not seen); OCAML_WHERE_PATH is
#   # not needed. A target directory of its own avoids rebuilding the
#   # binding each time CI switches between OCaml 4.13 and 5.3.
#   OCAMLOPT=$P/bin/ocamlopt CARGO_TARGET_DIR=target/ocaml5 cargo build ...
#   # the OCaml side: Debian's dune 2.9.3 drives OCaml 5.3 for a project in
#   # `(lang dune 2.9)`, with the compiler first on PATH and its libraries
#   # (unix, threads, ...) first on OCAMLPATH (else dune takes Debian's
#   # findlib entries and says `Library "unix" ... is hidden`); a build
#   # directory of its own keeps the 4.13 build:
#   PATH=$P/bin:$PATH OCAMLPATH=$P/lib/ocaml dune build --build-dir _build-ocaml5 @runtest
# Only the compiler's own libraries exist for 5.3: Debian's (lwt, fmt,
# ...) are compiled by 4.13 and are not usable with it.
set -euo pipefail

version=5.3.0
prefix=${1:-$HOME/.cache/pando-ocaml-$version}
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)

if [ "$("$prefix/bin/ocamlopt" -version 2>/dev/null)" = "$version" ]; then
  echo "ocaml5: OCaml $version already in $prefix" >&2
  echo "$prefix"
  exit 0
fi

for tool in npm make cc; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "ocaml5: $tool is required" >&2
    exit 1
  fi
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "ocaml5: fetching ocaml@$version from the npm registry" >&2
(cd "$work" && npm pack --silent "ocaml@$version" >/dev/null)
tar xzf "$work/ocaml-$version.tgz" -C "$work"
src="$work/package"
if [ "$(head -n 1 "$src/VERSION")" != "$version" ]; then
  echo "ocaml5: the npm package is not OCaml $version's source tree" >&2
  exit 1
fi

echo "ocaml5: building OCaml $version into $prefix (about 3.5 minutes)" >&2
start=$SECONDS
(
  cd "$src"
  # Without what the binding never uses (ocamldoc, ocamltest, the
  # debugger, the debug and instrumented runtimes, the manual pages):
  # 387 CPU-seconds instead of 477.
  ./configure --prefix="$prefix" --disable-ocamldoc --disable-ocamltest \
    --disable-ocamldebug --disable-debug-runtime \
    --disable-instrumented-runtime --disable-stdlib-manpages \
    >"$work/configure.log" 2>&1 \
    || { tail -n 30 "$work/configure.log" >&2; exit 1; }
  nice make -j"${JOBS:-2}" >"$work/make.log" 2>&1 \
    || { tail -n 30 "$work/make.log" >&2; exit 1; }
  make install >"$work/install.log" 2>&1 \
    || { tail -n 30 "$work/install.log" >&2; exit 1; }
)
if [ "$("$prefix/bin/ocamlopt" -version 2>/dev/null)" != "$version" ]; then
  echo "ocaml5: $prefix/bin/ocamlopt does not say $version after the build" >&2
  exit 1
fi
echo "ocaml5: built in $((SECONDS - start)) s" >&2
echo "$prefix"
