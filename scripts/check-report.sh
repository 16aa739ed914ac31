#!/usr/bin/env bash
# Checks a replay report in a real headless browser (Debian's chromium):
# the page loads, holds its title and charts, logs no console error, and a
# screenshot is taken.
#   scripts/check-report.sh REPORT.html [SCREENSHOT.png]
set -euo pipefail
html=${1:?usage: check-report.sh REPORT.html [SCREENSHOT.png]}
out=${2:-${html%.html}.png}
[ -f "$html" ] || { echo "no such file: $html" >&2; exit 1; }

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "chromium is not installed (Debian package: chromium)" >&2
    exit 1
  fi
fi

profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
url="file://$(realpath "$html")"
# Flags that keep Chromium off the (closed) network and quiet.
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --enable-logging=stderr --v=0 --user-data-dir="$profile")

dom=$(timeout 120 chromium "${flags[@]}" --dump-dom "$url" 2>"$profile/dom.log")
grep -q 'id="title"' <<<"$dom" || { echo "the page did not render its title" >&2; exit 1; }
charts=$(grep -o '<svg class="chart"' <<<"$dom" | wc -l)
[ "$charts" -ge 5 ] || { echo "expected at least 5 charts, found $charts" >&2; exit 1; }
if grep -E 'CONSOLE|Uncaught|Failed to load' "$profile/dom.log" >&2; then
  echo "the page logged errors" >&2
  exit 1
fi

timeout 120 chromium "${flags[@]}" --hide-scrollbars --window-size=1400,2300 --screenshot="$out" "$url" 2>"$profile/shot.log" >/dev/null
[ -s "$out" ] || { echo "no screenshot was produced" >&2; exit 1; }
echo "report OK: $charts charts, no console errors; screenshot $out"
