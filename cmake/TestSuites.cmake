# One CTest test per GoogleTest suite (not per test).
#
# Why: every process that loads Debian's LibTorch pays about 0.9 s before main() (symbol lookup
# over the 288 libraries it pulls in, and its operator registration). With one process per test,
# 581 tests spent more time starting than testing; one process per suite runs the same tests
# (every test of the executable belongs to exactly one suite) in a fifth of the processes.
# What is lost: CTest names a failing suite, not the test; the suite's output (shown on failure,
# outputOnFailure in CMakePresets.json) names the test, as GoogleTest always does.
#
# The suites are listed after each build by running the executable with --gtest_list_tests (as
# CMake's gtest_discover_tests does for tests), so a new suite needs no CMake edit.
#
#   mumoe_add_test_suites(<target> LABELS <label> [TIMEOUT <seconds>] [COST_PER_TEST <n>])
#
# COST_PER_TEST (default 1): how heavy a test of this executable is, relative to the others (a
# CLI test runs the program several times: 20). A suite's COST is its tests times this; it orders
# the first run of a fresh build, before CTest has measured anything.

set(MUMOE_TEST_SUITES_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/TestSuitesList.cmake")

function(mumoe_add_test_suites target)
  cmake_parse_arguments(ARG "" "LABELS;TIMEOUT;COST_PER_TEST" "" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 1500)  # a whole suite, under the ASan preset too (CTest's own default)
  endif()
  if(NOT ARG_COST_PER_TEST)
    set(ARG_COST_PER_TEST 1)
  endif()
  set(list_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites.cmake")
  set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites_include.cmake")
  # Every test executable prints a marker when all its tests were skipped and none failed, so
  # that a suite skipped as a whole (the CUDA suites without a GPU) is reported as skipped.
  target_link_libraries(${target} PRIVATE mumoe_test_outcome)
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND "${CMAKE_COMMAND}"
            -D "EXECUTABLE=$<TARGET_FILE:${target}>"
            -D "OUTPUT=${list_file}"
            -D "LABELS=${ARG_LABELS}"
            -D "TIMEOUT=${ARG_TIMEOUT}"
            -D "COST_PER_TEST=${ARG_COST_PER_TEST}"
            -D "WORKING_DIRECTORY=${CMAKE_CURRENT_BINARY_DIR}"
            -P "${MUMOE_TEST_SUITES_SCRIPT}"
    BYPRODUCTS "${list_file}"
    VERBATIM)
  file(WRITE "${include_file}"
       "if(EXISTS \"${list_file}\")\n"
       "  include(\"${list_file}\")\n"
       "else()\n"
       "  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\n"
       "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
endfunction()
