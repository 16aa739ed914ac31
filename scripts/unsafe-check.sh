#!/usr/bin/env bash
# The unsafe code under tools, not only under review (issue #42), with
# the nightly toolchain (`rustup toolchain install nightly --profile
# minimal`; Miri and rust-src are added here if missing):
#   1. Miri over the tests that reach every unsafe site of pando-core's
#      trie (a values inode's hand-laid block, the in-place update,
#      prefetches) and pando-store's hash memo: undefined behaviour, leaks,
#      data races.
#   2. AddressSanitizer over all of pando-core's `dir` tests and
#      pando-store's concurrency tests (readers against the writer, GC
#      against both) and
#      the memo's: what Miri cannot run (system calls, real files, sizes
#      Miri would take hours over).
#   3. Shuttle: every schedule of a thread upgrading a `Weak` of an inode
#      while its owner updates it (pando-core
#      tests/shuttle_in_place_update.rs, built with `--cfg pando_shuttle`).
# Each part builds in a target directory of its own (target/miri,
# target/asan, target/shuttle), so that none rebuilds the others' or the
# normal build. Usage: scripts/unsafe-check.sh [miri|asan|shuttle]...
# (all three by default). Prints the seconds each part took.
set -euo pipefail
cd "$(dirname "$0")/.."

parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(miri asan shuttle)
host=$(rustc +nightly -vV | sed -n 's/^host: //p')

run() {
  local start=$SECONDS
  printf '\n== unsafe-check: %s\n' "$1"
  "$@"
  printf '== unsafe-check: %s took %d s\n' "$1" $((SECONDS - start))
}

miri() {
  if ! rustup +nightly component list --installed | grep -q '^miri'; then
    rustup +nightly component add miri rust-src
  fi
  cargo +nightly miri setup >/dev/null
  # The trie's tests that reach each of its unsafe sites (checked once
  # with a marker printed at every site); the property tests and the
  # large directories would take Miri an hour.
  cargo +nightly miri test --locked -p pando-core --test dir -- \
    a_values_block an_inode_another hints_name prefetch_takes no_inode_goes
  # The hash memo: two threads racing to set it (fewer rounds under Miri).
  cargo +nightly miri test --locked -p pando-store --lib -- node::memo
}

asan() {
  # Only the crates of the workspace and their dependencies are
  # instrumented, not std (no -Zbuild-std): ASan checks every load and
  # store of this code, and every allocation whatever code makes it.
  export RUSTFLAGS="-Zsanitizer=address" RUSTDOCFLAGS="-Zsanitizer=address"
  export CARGO_TARGET_DIR=target/asan ASAN_OPTIONS=detect_leaks=1
  cargo +nightly test --locked --target "$host" -p pando-core --test dir
  cargo +nightly test --locked --target "$host" -p pando-store \
    --test concurrent_readers --test gc_concurrency
  cargo +nightly test --locked --target "$host" -p pando-store --lib -- node::memo
}

shuttle() {
  # (The stable toolchain suffices here.)
  RUSTFLAGS="--cfg pando_shuttle" CARGO_TARGET_DIR=target/shuttle \
    cargo test --release --locked -p pando-core --test shuttle_in_place_update
}

for part in "${parts[@]}"; do
  case $part in
    miri | asan | shuttle) run "$part" ;;
    *)
      echo "unsafe-check: no part $part (miri, asan, shuttle)" >&2
      exit 2
      ;;
  esac
done
