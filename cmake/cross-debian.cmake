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
# MOSHPIT_CROSS_SYSROOT: instead of the :<arch> packages installed with
# multiarch, the target's libraries unpacked into a directory
# (cmake/cross-sysroot.sh makes one with apt-get download and dpkg -x,
# installing nothing). Headers and libraries come from it through
# pkg-config; the cross compiler's own libc (crossbuild-essential-<arch>,
# in /usr/<triplet>) stays the C library, and the linker finds the
# libraries' own dependencies there with -rpath-link.
set(MOSHPIT_CROSS_SYSROOT "" CACHE PATH
    "Target libraries unpacked here instead of multiarch :<arch> packages")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES MOSHPIT_CROSS_SYSROOT)
set(_mp_cross_libdirs "")
if(MOSHPIT_CROSS_SYSROOT)
  set(_mp_s "${MOSHPIT_CROSS_SYSROOT}")
  set(_mp_cross_libdirs
      "${_mp_s}/usr/lib/${MOSHPIT_CROSS_TRIPLET}:${_mp_s}/lib/${MOSHPIT_CROSS_TRIPLET}")
  set(ENV{PKG_CONFIG_LIBDIR} "${_mp_s}/usr/lib/${MOSHPIT_CROSS_TRIPLET}/pkgconfig:${_mp_s}/usr/share/pkgconfig")
  set(ENV{PKG_CONFIG_SYSROOT_DIR} "${_mp_s}")
  set(CMAKE_FIND_ROOT_PATH "${_mp_s}")
  set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
  set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
  # the architecture's own headers (OpenSSL's opensslconf.h); the cross
  # compiler looks in /usr/<triplet>/include and /usr/include only
  set(CMAKE_C_FLAGS_INIT
      "-isystem ${_mp_s}/usr/include/${MOSHPIT_CROSS_TRIPLET}")
  foreach(_mp_kind EXE SHARED MODULE)
    set(CMAKE_${_mp_kind}_LINKER_FLAGS_INIT
        "-Wl,-rpath-link,${_mp_cross_libdirs}")
  endforeach()
endif()
# qemu-user runs the target's binaries. With multiarch, the target's libc
# (libc6:<arch>, brought in by the :<arch> library packages) puts its
# dynamic loader where the binaries look for it, so no -L prefix is
# needed; with a sysroot, the loader and libc are the cross compiler's
# (-L /usr/<triplet>) and the libraries are the sysroot's (the guest's
# LD_LIBRARY_PATH, which qemu's -E sets for the guest only).
find_program(MOSHPIT_CROSS_QEMU_PATH ${MOSHPIT_CROSS_QEMU})
if(MOSHPIT_CROSS_QEMU_PATH)
  if(MOSHPIT_CROSS_SYSROOT)
    set(CMAKE_CROSSCOMPILING_EMULATOR ${MOSHPIT_CROSS_QEMU_PATH} -L
        /usr/${MOSHPIT_CROSS_TRIPLET} -E
        LD_LIBRARY_PATH=${_mp_cross_libdirs})
  else()
    set(CMAKE_CROSSCOMPILING_EMULATOR ${MOSHPIT_CROSS_QEMU_PATH})
  endif()
endif()
