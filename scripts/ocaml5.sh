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
# to stderr. Building takes about 4 minutes on 2 cores (JOBS=N, default 2).
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

echo "ocaml5: building OCaml $version into $prefix (about 4 minutes)" >&2
start=$SECONDS
(
  cd "$src"
  ./configure --prefix="$prefix" >"$work/configure.log" 2>&1 \
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
