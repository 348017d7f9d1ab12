#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Makes a directory of a Debian target architecture's libraries for a
# cross build (MOSHPIT_CROSS_SYSROOT in cmake/cross-debian.cmake) without
# installing anything: apt-get, with its own lists, cache and an empty
# package status kept in DIR/.apt and the target as its only
# architecture, reads the machine's configured sources, downloads the
# .debs of libzmq3-dev, libsodium-dev, libmsgpack-dev and libssl-dev with
# the libraries they link and the .pc files their pkg-config data names,
# and dpkg -x unpacks them into DIR. Multiarch would need the packages
# both architectures share (libssl3, say) at exactly the machine's
# versions, which fails when one suite's index for the target does not
# download; here an index that fails is left out (apt-get update says
# so), and each package comes from whichever suite still has it. libc,
# libgcc and libstdc++ are the cross toolchain's
# (crossbuild-essential-ARCH). Runs again only when the list changes.
# Usage: cross-sysroot.sh ARCH DIR   (ARCH: armhf, arm64, ...)
set -euo pipefail
arch="${1:?usage: cross-sysroot.sh ARCH DIR}"
dir="${2:?usage: cross-sysroot.sh ARCH DIR}"
pkgs=(
    # what the build links, and the headers
    libzmq3-dev libzmq5 libsodium-dev libsodium23 libmsgpack-dev
    libmsgpackc2 libssl-dev libssl3
    # libzmq5's libraries (the linker resolves them through -rpath-link)
    libbsd0 libmd0 libnorm1 libpgm-5.3-0 libgssapi-krb5-2 libkrb5-3
    libk5crypto3 libkrb5support0 libcom-err2 libkeyutils1
    # the .pc files that libzmq.pc's Requires.private names (pkg-config
    # --cflags reads them)
    libkrb5-dev krb5-multidev comerr-dev libpgm-dev libnorm-dev libbsd-dev
    libmd-dev libxml2-dev
)
stamp="$arch ${pkgs[*]}"
if [ -f "$dir/.apt/done" ] && [ "$(cat "$dir/.apt/done")" = "$stamp" ]; then
    exit 0
fi
# DIR is removed and made anew: only an empty one or one made here
if [ -e "$dir" ] && [ ! -d "$dir/.apt" ] &&
    [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then
    echo "cross-sysroot: $dir is not empty and was not made by this" >&2
    exit 2
fi
rm -rf "$dir"
mkdir -p "$dir/.apt/lists/partial" "$dir/.apt/archives/partial" \
    "$dir/.apt/debs"
: >"$dir/.apt/status"
apt_opts=(
    -o "Dir::State::Lists=$dir/.apt/lists"
    -o "Dir::State::status=$dir/.apt/status"
    -o "Dir::Cache::Archives=$dir/.apt/archives"
    -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=
    -o "APT::Architecture=$arch" -o "APT::Architectures::=$arch"
    -o Debug::NoLocking=1
)
# as root, apt hands downloads to its _apt user, who cannot write in DIR
[ "$(id -u)" -ne 0 ] || apt_opts+=(-o APT::Sandbox::User=root)
# An index that fails to download is only reported: the packages may all
# be in the others (the download below fails if one is not).
apt-get "${apt_opts[@]}" -qq update ||
    echo "cross-sysroot: some $arch index failed to download; using the rest"
(cd "$dir/.apt/debs" && apt-get "${apt_opts[@]}" -qq download "${pkgs[@]}")
for deb in "$dir"/.apt/debs/*.deb; do
    dpkg -x "$deb" "$dir"
done
for deb in "$dir"/.apt/debs/*.deb; do
    deb=${deb##*/}
    echo "${deb%.deb}"
done >"$dir/.apt/versions"
echo "$stamp" >"$dir/.apt/done"
echo "cross-sysroot: $arch: $(wc -l <"$dir/.apt/versions") packages in $dir"
