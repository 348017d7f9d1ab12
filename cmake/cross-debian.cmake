# SPDX-License-Identifier: MIT
# Shared part of the Debian cross toolchain files (toolchain-*.cmake set
# MOSHPIT_CROSS_TRIPLET, MOSHPIT_CROSS_PROCESSOR and MOSHPIT_CROSS_QEMU,
# then include this). Debian's cross compilers search the multiarch
# directories (/usr/lib/<triplet>) themselves, so no sysroot is needed;
# pkg-config is pointed at the target's .pc files only, so that no host
# library is picked up by mistake.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR ${MOSHPIT_CROSS_PROCESSOR})
set(CMAKE_C_COMPILER ${MOSHPIT_CROSS_TRIPLET}-gcc)
set(CMAKE_CXX_COMPILER ${MOSHPIT_CROSS_TRIPLET}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${MOSHPIT_CROSS_TRIPLET})
set(ENV{PKG_CONFIG_LIBDIR}
    "/usr/lib/${MOSHPIT_CROSS_TRIPLET}/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")
# Programs come from the build machine, libraries and headers from the
# target's multiarch directories.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
# qemu-user runs the target's binaries: the target's libc (libc6:<arch>,
# brought in by the :<arch> library packages) puts its dynamic loader
# where the binaries look for it, so no -L prefix is needed.
find_program(MOSHPIT_CROSS_QEMU_PATH ${MOSHPIT_CROSS_QEMU})
if(MOSHPIT_CROSS_QEMU_PATH)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${MOSHPIT_CROSS_QEMU_PATH})
endif()
