#!/bin/sh
# unpack.sh MIRROR_DIR SRC_DIR
#
# Unpacks irmin 3.7.2 and the OCaml libraries it needs that Debian bookworm
# does not ship, at pinned tags, from bare git mirrors, into SRC_DIR: the
# layout IRMIN_SRC names (README.md, "Getting irmin 3.7.2").
# MIRROR_DIR holds one bare repository per project as OWNER+NAME/repo
# (e.g. made with `git clone --bare https://github.com/OWNER/NAME
# MIRROR_DIR/OWNER+NAME/repo`).
set -eu
MIRROR=${1:?usage: unpack.sh MIRROR_DIR SRC_DIR}
SRC=${2:?usage: unpack.sh MIRROR_DIR SRC_DIR}
mkdir -p "$SRC"

# name  owner+repo  tag-or-commit
LIBS="
irmin            mirage+irmin              c76e1c5368610db070401203f5b4ba6753db83fd
repr             mirage+repr               0.7.0
index            mirage+index              1.6.1
digestif         mirage+digestif           v1.1.4
optint           mirage+optint             v0.3.0
checkseum        mirage+checkseum          v0.5.2
progress         CraigFe+progress          0.2.1
semaphore-compat mirage+semaphore-compat   1.0.1
lru              pqwy+lru                  v0.3.1
psq              pqwy+psq                  v0.2.1
rusage           CraigFe+ocaml-rusage      1.0.0
bheap            backtracking+bheap        2.0.0
either           mirage+either             1.0.0
vector           backtracking+vector       1.0.0
tezos-base58     tarides+tezos-base58      1.0.0
"
echo "$LIBS" | while read -r name repo rev; do
  [ -n "$name" ] || continue
  # sh has no pipefail: a tag the mirror lacks would leave an empty
  # directory behind `git archive | tar`, so each is checked first
  git --git-dir="$MIRROR/$repo/repo" rev-parse --verify -q "$rev^{commit}" >/dev/null \
    || { echo "unpack.sh: $MIRROR/$repo/repo has no $rev" >&2; exit 1; }
  rm -rf "$SRC/$name"; mkdir -p "$SRC/$name"
  if [ "$name" = irmin ]; then
    # only what the build needs (irmin's test/ holds large binary fixtures)
    git --git-dir="$MIRROR/$repo/repo" archive "$rev" dune-project LICENSE.md src bench \
      $(git --git-dir="$MIRROR/$repo/repo" ls-tree --name-only "$rev" | grep '\.opam$') \
      | tar -x -C "$SRC/$name"
  else
    git --git-dir="$MIRROR/$repo/repo" archive "$rev" | tar -x -C "$SRC/$name"
  fi
  [ -n "$(ls -A "$SRC/$name")" ] || { echo "unpack.sh: nothing unpacked for $name" >&2; exit 1; }
  echo "unpacked $name ($repo $rev)"
done
