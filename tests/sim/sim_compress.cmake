# SPDX-License-Identifier: MIT
# Runs moshpit-sim (path in SIM) with --compression on a full grid (64
# peers, M = 8, d = 2, random weights) and checks the error it reports
# after the d rounds ("relerr rms R max X", relative to the RMS of the
# initial values) against the bounds test_sim_compress derives for that
# grid from each format's step, and that the error is there at all (a
# tool that ignored the option would print float32's 1e-8). Without the
# option no relerr line may appear. Usage: cmake -DSIM=path/to/moshpit-sim
# [-DEMU=emulator;args] -P sim_compress.cmake
set(args --peers 64 --group-size 8 --dims 2 --rounds 2 --count 4099
         --weights random --seed 12)
# setting, smallest plausible max, bound on max, bound on rms
foreach(spec "int8 1e-4 3.2e-2 1.0e-2" "int4 1e-3 5.9e-1 1.8e-1")
  separate_arguments(spec)
  list(GET spec 0 codec)
  list(GET spec 1 floor)
  list(GET spec 2 max_bound)
  list(GET spec 3 rms_bound)
  execute_process(COMMAND ${EMU} ${SIM} ${args} --compression ${codec}
                  OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "moshpit-sim --compression ${codec} exited with ${rc}:\n${out}")
  endif()
  if(NOT out MATCHES "relerr rms ([0-9.e+-]+) max ([0-9.e+-]+) after round 2 \\(${codec},")
    message(FATAL_ERROR "moshpit-sim --compression ${codec}: no relerr line:\n${out}")
  endif()
  set(rms ${CMAKE_MATCH_1})
  set(max ${CMAKE_MATCH_2})
  if(NOT max LESS ${max_bound} OR NOT rms LESS ${rms_bound})
    message(FATAL_ERROR "${codec}: error max ${max} rms ${rms} above the bounds ${max_bound} / ${rms_bound}")
  endif()
  if(NOT max GREATER ${floor})
    message(FATAL_ERROR "${codec}: error max ${max}: the values were not compressed")
  endif()
  message(STATUS "moshpit-sim ${codec}: max ${max} rms ${rms} (bounds ${max_bound} / ${rms_bound})")
endforeach()
execute_process(COMMAND ${EMU} ${SIM} ${args}
                OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR out MATCHES "relerr")
  message(FATAL_ERROR "moshpit-sim without --compression (rc ${rc}):\n${out}")
endif()
execute_process(COMMAND ${EMU} ${SIM} ${args} --compression int3
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "moshpit-sim --compression int3 exited with ${rc}, not 2")
endif()
