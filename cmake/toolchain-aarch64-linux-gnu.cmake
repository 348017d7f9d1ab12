# SPDX-License-Identifier: MIT
# Cross build for 64-bit ARM Linux (Raspberry Pi 4/5 with a 64-bit OS) with
# Debian's cross toolchain and multiarch libraries:
#   apt-get install crossbuild-essential-arm64 qemu-user \
#     libzmq3-dev:arm64 libsodium-dev:arm64 libmsgpack-dev:arm64
#   cmake -S . -B build-arm64 \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake
# Tests run under qemu-user (CMAKE_CROSSCOMPILING_EMULATOR) where it is
# installed; see docs/DESIGN.md, "Other architectures", for what runs.
set(MOSHPIT_CROSS_TRIPLET aarch64-linux-gnu)
set(MOSHPIT_CROSS_PROCESSOR aarch64)
set(MOSHPIT_CROSS_QEMU qemu-aarch64)
include(${CMAKE_CURRENT_LIST_DIR}/cross-debian.cmake)
