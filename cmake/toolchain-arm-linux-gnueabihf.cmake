# SPDX-License-Identifier: MIT
# Cross build for 32-bit ARM Linux, hard float (Raspberry Pi OS 32-bit,
# Debian armhf) with Debian's cross toolchain and multiarch libraries:
#   apt-get install crossbuild-essential-armhf qemu-user \
#     libzmq3-dev:armhf libsodium-dev:armhf libmsgpack-dev:armhf
#   cmake -S . -B build-armhf \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-arm-linux-gnueabihf.cmake
# Tests run under qemu-user (CMAKE_CROSSCOMPILING_EMULATOR) where it is
# installed; see docs/DESIGN.md, "Other architectures", for what runs.
set(MOSHPIT_CROSS_TRIPLET arm-linux-gnueabihf)
set(MOSHPIT_CROSS_PROCESSOR armv7l)
set(MOSHPIT_CROSS_QEMU qemu-arm)
include(${CMAKE_CURRENT_LIST_DIR}/cross-debian.cmake)
