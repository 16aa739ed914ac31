#!/usr/bin/env bash
# install-prefix.sh PREFIX
#
# Installs irmin 3.7.2's libraries (irmin, ppx_irmin, irmin-pack,
# irmin-tezos) and the 14 it vendors, built from $IRMIN_SRC, into the
# findlib prefix PREFIX with `dune install`, as opam would install them
# (their version set to 3.7.2, as opam's `dune subst` does). With
# OCAMLPATH=PREFIX/lib, irmin-src.sh then finds them as an opam switch's
# and the driver and the duo are built against them: the way to check that
# path without opam. The build happens in target/irmin-install; about as
# long as the driver's first build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix=${1:?usage: install-prefix.sh PREFIX (with IRMIN_SRC set)}
: "${IRMIN_SRC:?install-prefix.sh builds from IRMIN_SRC, the sources of irmin 3.7.2 (README.md)}"
. "$here/irmin-src.sh"
# the sources, even where an installed irmin would be found first
IRMIN_FROM=src
[ -f "$IRMIN_SRC/irmin/src/irmin-tezos/schema.ml" ] || { echo "IRMIN_SRC=$IRMIN_SRC is not irmin 3.7.2's sources" >&2; exit 1; }
IRMIN_SRC=$(cd "$IRMIN_SRC" && pwd)
ws=$root/target/irmin-install
mkdir -p "$ws"
irmin_workspace "$ws"
sed -i 's/^(name irmin)$/(name irmin)\n(version 3.7.2)/' "$ws/irmin/dune-project"
printf '(lang dune 2.9)\n(profile release)\n' > "$ws/dune-workspace"
# irmin's, those of the vendored libraries, and two more those hold
packages="irmin ppx_irmin irmin-pack irmin-tezos $IRMIN_VENDORED ppx_repr terminal"
cd "$ws"
dune build -j "${JOBS:-2}" --only-packages "$(echo $packages | tr ' ' ,)" @install
dune install --prefix "$prefix" $packages 2>&1 | tail -1
echo "installed into $prefix: export OCAMLPATH=$prefix/lib"
