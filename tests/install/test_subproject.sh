#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Configures a project that includes moshpit with add_subdirectory() and
# links moshpit::moshpit: moshpit's tests and examples must not be part of
# it unless asked for (MOSHPIT_BUILD_TESTS=ON brings the tests back), and
# the embedding project's build type is its own business. Configure only:
# the library itself is built by the other tests.
# Arguments: source dir.
set -euo pipefail
src="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/parent"
cat > "$tmp/parent/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.13)
project(parent C)
enable_testing()
add_subdirectory("$src" moshpit)
add_executable(prog prog.c)
target_link_libraries(prog moshpit::moshpit)
file(WRITE \${CMAKE_BINARY_DIR}/build_type.txt "\${CMAKE_BUILD_TYPE}")
CM
cp "$src/examples/hello.c" "$tmp/parent/prog.c"

# targets: what `cmake --build --target help` lists (Makefiles and Ninja),
# read whole before grep -q (which would stop the pipe early)
targets() { cmake --build "$1" --target help 2>/dev/null; }

cmake -S "$tmp/parent" -B "$tmp/b1" >/dev/null
n_tests=$(cd "$tmp/b1" && ctest -N | sed -n 's/^Total Tests: //p')
if [ "${n_tests:-0}" != 0 ]; then
    echo "embedded moshpit registers $n_tests tests by default"
    exit 1
fi
t1=$(targets "$tmp/b1")
for t in test_api moshpit-demo; do
    if grep -qw -- "$t" <<<"$t1"; then
        echo "embedded moshpit builds $t by default"
        exit 1
    fi
done
grep -qw prog <<<"$t1" ||
    { echo "the embedding project's own target is missing"; exit 1; }
if [ -n "$(cat "$tmp/b1/build_type.txt")" ]; then
    echo "embedded moshpit set the parent's CMAKE_BUILD_TYPE"
    exit 1
fi

cmake -S "$tmp/parent" -B "$tmp/b2" -DMOSHPIT_BUILD_TESTS=ON >/dev/null
t2=$(targets "$tmp/b2")
grep -qw test_api <<<"$t2" ||
    { echo "MOSHPIT_BUILD_TESTS=ON does not bring the tests"; exit 1; }
echo "subproject test: no tests or examples unless asked for"
