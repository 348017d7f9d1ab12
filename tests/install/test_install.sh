#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the built library into a temporary prefix, then builds a program
# outside the tree twice: with `cc prog.c $(pkg-config --cflags --libs
# moshpit)` and with CMake's find_package(moshpit). Both binaries must run
# (a lone peer averaging alone). Arguments: build dir, source dir.
set -euo pipefail
build="$1"
src="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
libdir=$(ls -d "$tmp"/prefix/lib*/pkgconfig | head -1)
libdir=${libdir%/pkgconfig}
export PKG_CONFIG_PATH="$libdir/pkgconfig"
test -f "$tmp/prefix/include/moshpit.h"
# the public header must stand alone
grep -E '^#include' "$tmp/prefix/include/moshpit.h" | grep -vqE 'stddef.h|stdint.h' &&
    { echo "moshpit.h includes more than stddef.h/stdint.h"; exit 1; }
cp "$src/examples/hello.c" "$tmp/prog.c"
# shellcheck disable=SC2046
cc -o "$tmp/prog" "$tmp/prog.c" $(pkg-config --cflags --libs moshpit) \
    -Wl,-rpath,"$libdir"
"$tmp/prog" | grep -q "round 4: success, group of 1"
mkdir "$tmp/cm"
cat > "$tmp/cm/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(consumer C)
find_package(moshpit REQUIRED)
add_executable(prog prog.c)
target_link_libraries(prog moshpit::moshpit)
CM
cp "$src/examples/hello.c" "$tmp/cm/prog.c"
cmake -S "$tmp/cm" -B "$tmp/cm/b" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
    -DCMAKE_BUILD_RPATH="$libdir" >/dev/null
cmake --build "$tmp/cm/b" >/dev/null
"$tmp/cm/b/prog" | grep -q "round 4: success, group of 1"
# only moshpit_* symbols are exported
bad=$(nm -D --defined-only "$libdir"/libmoshpit.so | awk '{print $3}' |
      grep -v '^moshpit_' | grep -v '^_' || true)
if [ -n "$bad" ]; then
    echo "unexpected exported symbols: $bad"
    exit 1
fi
echo "install test: pkg-config and find_package consumers built and ran"
