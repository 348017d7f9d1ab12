#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the built library into a temporary prefix, then builds a program
# outside the tree four times: against the shared library with `cc prog.c
# $(pkg-config --cflags --libs moshpit)` and with CMake's
# find_package(moshpit) and moshpit::moshpit, and against the static one
# with `pkg-config --static` and with moshpit::moshpit_static (which must
# bring its dependencies along). Every binary must run (a lone peer
# averaging alone), and the static ones must not load libmoshpit.so.
# The versions must agree: the installed header's MOSHPIT_VERSION_* macros,
# moshpit_version() of the installed library, `pkg-config --modversion`,
# the CMake package's moshpit_VERSION, and the library's soname
# (libmoshpit.so.MAJOR).
# Arguments: build dir, source dir.
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

# one version everywhere
pc_version=$(pkg-config --modversion moshpit)
cat > "$tmp/version.c" <<'C'
#include <moshpit.h>
#include <stdio.h>
int main(void) {
    printf("%d.%d.%d %s %s %d\n", MOSHPIT_VERSION_MAJOR, MOSHPIT_VERSION_MINOR,
           MOSHPIT_VERSION_PATCH, MOSHPIT_VERSION_STRING, moshpit_version(),
           MOSHPIT_VERSION_MAJOR);
    return 0;
}
C
# shellcheck disable=SC2046
cc -o "$tmp/version" "$tmp/version.c" $(pkg-config --cflags --libs moshpit) \
    -Wl,-rpath,"$libdir"
read -r v_macros v_string v_lib v_major < <("$tmp/version")
if [ "$v_macros" != "$pc_version" ] || [ "$v_string" != "$pc_version" ] ||
    [ "$v_lib" != "$pc_version" ]; then
    echo "versions differ: pkg-config $pc_version, header macros $v_macros," \
        "MOSHPIT_VERSION_STRING $v_string, moshpit_version() $v_lib"
    exit 1
fi
soname=$(readelf -d "$libdir/libmoshpit.so" |
         sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$soname" != "libmoshpit.so.$v_major" ]; then
    echo "soname $soname, want libmoshpit.so.$v_major"
    exit 1
fi

# static: both libraries are installed side by side and -lmoshpit would pick
# the shared one, so the archive is named instead (-l:libmoshpit.a); the
# rest is what --static adds for it
static_flags=$(pkg-config --static --cflags --libs moshpit)
case " $static_flags " in
*" -lzmq "*) ;;
*) echo "pkg-config --static does not name libzmq: $static_flags"; exit 1 ;;
esac
# shellcheck disable=SC2086
cc -o "$tmp/prog_static" "$tmp/prog.c" \
    ${static_flags/-lmoshpit/-l:libmoshpit.a}
if readelf -d "$tmp/prog_static" | grep -q 'libmoshpit\.so'; then
    echo "pkg-config --static consumer loads libmoshpit.so"
    exit 1
fi
"$tmp/prog_static" | grep -q "round 4: success, group of 1"

mkdir "$tmp/cm"
cat > "$tmp/cm/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.13)
project(consumer C)
find_package(moshpit ${WANT} REQUIRED)
file(WRITE ${CMAKE_BINARY_DIR}/moshpit_version.txt "${moshpit_VERSION}")
add_executable(prog prog.c)
target_link_libraries(prog moshpit::moshpit)
CM
cp "$src/examples/hello.c" "$tmp/cm/prog.c"
# any release of the same MAJOR keeps the ABI: asking for MAJOR.0 finds it
cmake -S "$tmp/cm" -B "$tmp/cm/b" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
    -DCMAKE_BUILD_RPATH="$libdir" -DWANT="$v_major.0" >/dev/null
cmake --build "$tmp/cm/b" >/dev/null
"$tmp/cm/b/prog" | grep -q "round 4: success, group of 1"
cm_version=$(cat "$tmp/cm/b/moshpit_version.txt")
if [ "$cm_version" != "$pc_version" ]; then
    echo "CMake package version $cm_version, pkg-config $pc_version"
    exit 1
fi

# moshpit::moshpit_static: the package itself says what else to link
mkdir "$tmp/cms"
cat > "$tmp/cms/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.13)
project(consumer_static C)
find_package(moshpit REQUIRED)
add_executable(prog prog.c)
target_link_libraries(prog moshpit::moshpit_static)
CM
cp "$src/examples/hello.c" "$tmp/cms/prog.c"
cmake -S "$tmp/cms" -B "$tmp/cms/b" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
    >/dev/null
cmake --build "$tmp/cms/b" >/dev/null
if readelf -d "$tmp/cms/b/prog" | grep -q 'libmoshpit\.so'; then
    echo "moshpit::moshpit_static consumer loads libmoshpit.so"
    exit 1
fi
"$tmp/cms/b/prog" | grep -q "round 4: success, group of 1"
# only moshpit_* symbols are exported
bad=$(nm -D --defined-only "$libdir"/libmoshpit.so | awk '{print $3}' |
      grep -v '^moshpit_' | grep -v '^_' || true)
if [ -n "$bad" ]; then
    echo "unexpected exported symbols: $bad"
    exit 1
fi
echo "install test: pkg-config and find_package consumers, shared and" \
    "static, built and ran; version $pc_version everywhere, $soname"
