# SPDX-License-Identifier: MIT
# nn-delay, the delay line of the netns WAN emulator (tests/netns/nn_delay.c),
# built where libnetfilter-queue is found. Included by tests/netns and by
# tests/bench (which builds the emulated network itself), once.
if(NOT TARGET nn-delay)
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(NN_NFQ QUIET IMPORTED_TARGET libnetfilter_queue)
  endif()
  if(NN_NFQ_FOUND)
    add_executable(nn-delay ${CMAKE_CURRENT_LIST_DIR}/nn_delay.c)
    target_compile_options(nn-delay PRIVATE ${MOSHPIT_WARNINGS})
    target_compile_definitions(nn-delay PRIVATE _GNU_SOURCE)
    target_link_libraries(nn-delay PRIVATE PkgConfig::NN_NFQ)
  else()
    message(STATUS "libnetfilter-queue not found: no nn-delay, the netns "
                   "WAN emulator cannot delay packets")
  endif()
endif()
