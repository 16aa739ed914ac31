#!/usr/bin/env bash
# Placeholder: the duo against irmin 3.7.2 (scripts/duo.sh TRACE
# [--max-blocks N]) comes with it and replaces this file.
echo "no duo yet"
exit 0
