#!/usr/bin/env bash
# Debian's OCaml (4.13.1, dune 2.9.3) and the libraries that irmin 3.7.2
# needs when built from its sources (bench/irmin/README.md), and
# zstd (scripts/test.sh unpacks a vector for the duo with it). Installs
# only what `dpkg -s` does not find; needs root (apt-get) for that.
#
#   scripts/ocaml-deps.sh [--check]
#
# --check installs nothing: it exits 1 naming what is missing.
set -euo pipefail

packages=(
  ocaml ocaml-dune ocaml-findlib
  libdune-ocaml-dev libfmt-ocaml-dev liburi-ocaml-dev libuutf-ocaml-dev
  libjsonm-ocaml-dev liblwt-ocaml-dev libocamlgraph-ocaml-dev liblogs-ocaml-dev
  libastring-ocaml-dev libmtime-ocaml-dev libbigstringaf-ocaml-dev
  libppxlib-ocaml-dev libcmdliner-ocaml-dev libyojson-ocaml-dev
  libppx-deriving-ocaml-dev libuucp-ocaml-dev libzarith-ocaml-dev
  libeqaf-ocaml-dev libbase64-ocaml-dev
  zstd
)

missing=()
for p in "${packages[@]}"; do
  # dpkg -s also lists removed packages whose configuration remains.
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "ocaml-deps: all ${#packages[@]} Debian OCaml packages are installed ($(ocamlopt -version 2>/dev/null || echo '?'))"
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "ocaml-deps: missing: ${missing[*]}" >&2
  exit 1
fi
if [ "$(id -u)" != 0 ]; then
  echo "ocaml-deps: missing ${missing[*]}; run as root (apt-get install)" >&2
  exit 1
fi
echo "ocaml-deps: installing ${#missing[@]} package(s): ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "ocaml-deps: installed; $(ocamlopt -version)"
