#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Writes tests/abi/moshpit.abi, the ABI of a release that check_abi.sh
# compares every later build with: run it when the version is bumped for a
# release (and only then), on a build with debug information (-g, e.g.
# RelWithDebInfo) of that release, with GCC on x86-64 like CI:
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
#   cmake --build build --target moshpit
#   bash tests/abi/make_baseline.sh build
# Needs abidw (Debian: abigail-tools).
# Arguments: build dir.
set -euo pipefail
build="$1"
here="$(cd "$(dirname "$0")" && pwd)"
src="$(cd "$here/../.." && pwd)"
# shellcheck source=tests/abi/abidw_options.sh
. "$here/abidw_options.sh"
lib="$build/libmoshpit.so"
sections=$(readelf -S "$lib")
grep -q '\.debug_info' <<<"$sections" ||
    { echo "$lib has no debug information: build with -g"; exit 1; }
version=$(sed -n 's/^#define MOSHPIT_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' \
          "$src/include/moshpit.h" | paste -sd.)
abi_dump "$lib" "$here/moshpit.abi" "$src/include"
echo "$version" > "$here/baseline_version"
echo "tests/abi/moshpit.abi: the ABI of moshpit $version" \
    "($(grep -c '<function-decl' "$here/moshpit.abi") functions)"
