#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checks the Debian packages that `dpkg-buildpackage -us -uc -b` made
# (libmoshpit0, libmoshpit-dev, moshpit-tools) without installing them on
# the machine: each is unpacked with dpkg -x into a scratch root, then
#  - the shared library has the SONAME libmoshpit.so.N that its package is
#    named after, the -dev symlink points at it, and libmoshpit0 ships a
#    symbols file listing exactly the functions the library exports;
#  - the packages' dependencies: -dev on libmoshpit0 of the same version
#    and on the libraries' -dev packages, libmoshpit0 on libzmq5;
#  - a program builds with `pkg-config --cflags --libs moshpit` against the
#    unpacked tree, loads the unpacked libmoshpit.so.N and averages (a lone
#    peer); the same with `pkg-config --static` (no libmoshpit.so loaded)
#    and with CMake's find_package(moshpit);
#  - the tools run from the unpacked tree: moshpit-cert makes an authority
#    and issues a certificate that inspects VALID, moshpit-sim prints its
#    final line, moshpit-demo averages 3 peers exactly.
# With ARCH (say arm64, from `dpkg-buildpackage -us -uc -b -aarm64`) it
# checks that architecture's packages on this machine: consumers are built
# with the cross compiler (and CMake's toolchain file) and every program
# runs under qemu-user; that needs crossbuild-essential-ARCH, qemu-user
# and the :ARCH library packages (README, "Debian packages and ARM
# boards").
# Usage: test_debs.sh DIR-WITH-THE-DEBS SOURCE-DIR [ARCH]
set -euo pipefail
debs="${1:?directory with the .deb files}"
src=$(cd "${2:?source directory}" && pwd)
arch="${3:-$(dpkg --print-architecture)}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root="$tmp/root"
fail() { echo "test_debs: FAIL: $*" >&2; exit 1; }
ok() { echo "test_debs: ok: $*"; }

for p in libmoshpit0 libmoshpit-dev moshpit-tools; do
    deb=$(ls "$debs"/${p}_*_"$arch".deb 2>/dev/null | head -1 || true)
    [ -n "$deb" ] || fail "no ${p}_*_$arch.deb in $debs"
    dpkg -x "$deb" "$root"
    dpkg-deb -e "$deb" "$tmp/control-$p"
    dpkg-deb -f "$deb" Depends >"$tmp/depends-$p"
done
multiarch=$(dpkg-architecture -a"$arch" -qDEB_HOST_MULTIARCH 2>/dev/null)
cc=(cc)
run=()
cmake_cross=()
nm=nm
if [ "$arch" != "$(dpkg --print-architecture)" ]; then
    cc=("$multiarch-gcc")
    nm="$multiarch-nm"
    case "$arch" in
    arm64) run=(qemu-aarch64) ;;
    armhf) run=(qemu-arm) ;;
    *) fail "no emulator known for $arch" ;;
    esac
    cmake_cross=(-DCMAKE_TOOLCHAIN_FILE="$src/cmake/toolchain-$multiarch.cmake")
fi
libdir="$root/usr/lib/$multiarch"

# SONAME, symlink, package name
real=$(cd "$libdir" && ls libmoshpit.so.*.*.*)
soname=$(readelf -d "$libdir/$real" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ -f "$libdir/$soname" ] || fail "no $soname in libmoshpit0"
[ "libmoshpit${soname#libmoshpit.so.}" = libmoshpit0 ] ||
    fail "SONAME $soname in a package named libmoshpit0"
[ "$(readlink "$libdir/libmoshpit.so")" = "$soname" ] ||
    fail "libmoshpit.so -> $(readlink "$libdir/libmoshpit.so"), want $soname"
test -f "$libdir/libmoshpit.a" || fail "no static library"
test -f "$libdir/pkgconfig/moshpit.pc" || fail "no moshpit.pc"
test -f "$libdir/cmake/moshpit/moshpitConfig.cmake" || fail "no CMake package"
test -f "$root/usr/include/moshpit.h" || fail "no moshpit.h"
ok "$real, SONAME $soname, -dev symlink, .a, .pc, CMake package, header"

# the symbols file lists exactly what the library exports
sym="$tmp/control-libmoshpit0/symbols"
test -f "$sym" || fail "libmoshpit0 has no symbols file"
head -1 "$sym" | grep -q "^$soname libmoshpit0 " || fail "symbols: $(head -1 "$sym")"
"$nm" -D --defined-only "$libdir/$real" | awk 'NF == 3 { print $3 }' | sort \
    >"$tmp/exported"
sed -n 's/^ \([^@ ]*\)@Base .*/\1/p' "$sym" | sort >"$tmp/listed"
diff "$tmp/exported" "$tmp/listed" >&2 ||
    fail "exported symbols differ from the symbols file (< exported, > listed)"
ok "symbols file: $(wc -l <"$tmp/listed") symbols, all exported ones"

# dependencies
version=$(dpkg-deb -f "$(ls "$debs"/libmoshpit0_*_"$arch".deb | head -1)" Version)
grep -q "libmoshpit0 (= $version)" "$tmp/depends-libmoshpit-dev" ||
    fail "libmoshpit-dev Depends: $(cat "$tmp/depends-libmoshpit-dev")"
for d in libzmq3-dev libsodium-dev libmsgpack-dev; do
    grep -qw "$d" "$tmp/depends-libmoshpit-dev" || fail "libmoshpit-dev lacks $d"
done
grep -qw libzmq5 "$tmp/depends-libmoshpit0" ||
    fail "libmoshpit0 Depends: $(cat "$tmp/depends-libmoshpit0")"
ok "Depends: libmoshpit-dev on libmoshpit0 (= $version); libmoshpit0: $(cat "$tmp/depends-libmoshpit0")"

# a consumer with pkg-config, shared
export PKG_CONFIG_PATH="$libdir/pkgconfig"
export PKG_CONFIG_LIBDIR="$libdir/pkgconfig:/usr/lib/$multiarch/pkgconfig:/usr/share/pkgconfig"
[ "$(pkg-config --modversion moshpit)" = "${version%%-*}" ] ||
    fail "pkg-config --modversion: $(pkg-config --modversion moshpit), package $version"
cp "$src/examples/hello.c" "$tmp/prog.c"
# shellcheck disable=SC2046
"${cc[@]}" -o "$tmp/prog" "$tmp/prog.c" $(pkg-config --cflags --libs moshpit)
readelf -d "$tmp/prog" | grep -q "NEEDED.*\[$soname\]" ||
    fail "the consumer does not need $soname"
if [ "${#run[@]}" -eq 0 ]; then
    LD_LIBRARY_PATH="$libdir" ldd "$tmp/prog" | grep -q "$libdir/$soname" ||
        fail "the consumer does not load the unpacked $soname"
fi
LD_LIBRARY_PATH="$libdir" "${run[@]}" "$tmp/prog" |
    grep -q "round 4: success, group of 1" ||
    fail "pkg-config consumer did not average"
ok "pkg-config consumer built, loads $libdir/$soname, ran"

# static, with pkg-config --static (the archive named, as the .so is there too)
static_flags=$(pkg-config --static --cflags --libs moshpit)
# shellcheck disable=SC2086
"${cc[@]}" -o "$tmp/prog_static" "$tmp/prog.c" \
    ${static_flags/-lmoshpit/-l:libmoshpit.a}
if readelf -d "$tmp/prog_static" | grep -q 'libmoshpit\.so'; then
    fail "pkg-config --static consumer loads libmoshpit.so"
fi
LD_LIBRARY_PATH="$libdir" "${run[@]}" "$tmp/prog_static" |
    grep -q "round 4: success, group of 1" ||
    fail "static consumer did not average"
ok "pkg-config --static consumer built and ran"

# CMake's find_package
mkdir "$tmp/cm"
cat >"$tmp/cm/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(consumer C)
find_package(moshpit REQUIRED)
add_executable(prog prog.c)
target_link_libraries(prog moshpit::moshpit)
CM
cp "$src/examples/hello.c" "$tmp/cm/prog.c"
cmake -S "$tmp/cm" -B "$tmp/cm/b" -DCMAKE_PREFIX_PATH="$root/usr" \
    "${cmake_cross[@]}" >/dev/null
cmake --build "$tmp/cm/b" >/dev/null
LD_LIBRARY_PATH="$libdir" "${run[@]}" "$tmp/cm/b/prog" | grep -q "round 4: success, group of 1" ||
    fail "CMake consumer did not average"
ok "CMake find_package(moshpit) consumer built and ran"

# the tools
bin="$root/usr/bin"
export LD_LIBRARY_PATH="$libdir"
auth=$("${run[@]}" "$bin/moshpit-cert" authority)
apub=$(sed -n 's/^public: //p' <<<"$auth")
asec=$(sed -n 's/^secret: //p' <<<"$auth")
peer=$("${run[@]}" "$bin/moshpit-cert" authority | sed -n 's/^public: //p')
cert=$("${run[@]}" "$bin/moshpit-cert" issue --authority-secret "$asec" --peer "$peer" \
       --swarm debs --days 1)
"${run[@]}" "$bin/moshpit-cert" inspect --authority "$apub" --swarm debs --peer "$peer" \
    - <<<"$cert" | grep -qE "^status: +VALID$" ||
    fail "moshpit-cert: certificate not VALID"
ok "moshpit-cert: authority, issue, inspect VALID"
"${run[@]}" "$bin/moshpit-sim" --peers 64 --group-size 4 --rounds 4 --seed 1 |
    grep -qE "target MSE .* (first reached at round|not reached in)" ||
    fail "moshpit-sim printed no final line"
ok "moshpit-sim ran"
"${run[@]}" "$bin/moshpit-demo" --peers 3 --size 10000 --rounds 1 >"$tmp/demo" 2>&1 ||
    { cat "$tmp/demo" >&2; fail "moshpit-demo failed"; }
ok "moshpit-demo: $(tail -1 "$tmp/demo")"
echo "test_debs: all passed ($arch)"
