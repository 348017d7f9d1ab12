# SPDX-License-Identifier: MIT
# Runs moshpit-sim (path in SIM) twice with the same seed and once with
# another: the first two outputs must be identical byte for byte, the third
# must differ, and every run must exit 0 (no call hung) and print its final
# line. Usage: cmake -DSIM=path/to/moshpit-sim [-DEXTRA=arg;arg...]
# [-DEMU=emulator;args] -P sim_repro.cmake (EXTRA: more moshpit-sim
# arguments, a CMake list; EMU: the cross-compiling emulator, if any)
set(args --peers 600 --group-size 8 --rounds 8 --fail-prob 0.02
         --loss 0.01 --churn 3 --weights random --positions random ${EXTRA})
foreach(run a b c)
  set(seed 11)
  if(run STREQUAL "c")
    set(seed 12)
  endif()
  execute_process(COMMAND ${EMU} ${SIM} ${args} --seed ${seed}
                  OUTPUT_VARIABLE out_${run} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "moshpit-sim run ${run} exited with ${rc}:\n${out_${run}}")
  endif()
  if(NOT out_${run} MATCHES "target MSE [^\n]* (first reached at round|not reached in)")
    message(FATAL_ERROR "moshpit-sim run ${run}: no final line:\n${out_${run}}")
  endif()
endforeach()
if(NOT out_a STREQUAL out_b)
  message(FATAL_ERROR "same seed, different output:\n${out_a}\n---\n${out_b}")
endif()
if(out_a STREQUAL out_c)
  message(FATAL_ERROR "different seeds, same output:\n${out_a}")
endif()
string(LENGTH "${out_a}" len)
message(STATUS "moshpit-sim: two runs with seed 11 identical (${len} bytes), seed 12 differs")
