# Run by cmake -P after a test executable is built (cmake/TestSuites.cmake): lists its GoogleTest
# suites and writes one CTest test per suite into OUTPUT.
#   EXECUTABLE, OUTPUT, LABELS, TIMEOUT, WORKING_DIRECTORY, COST_PER_TEST: set with -D.
execute_process(COMMAND "${EXECUTABLE}" --gtest_list_tests
                OUTPUT_VARIABLE listing ERROR_VARIABLE errors RESULT_VARIABLE status TIMEOUT 120)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "Listing the tests of ${EXECUTABLE} failed (${status}):\n${listing}${errors}")
endif()

# One list element per line. A parameterised test's line may carry its value ("# GetParam() =
# ..."), which may hold characters a CMake list treats specially: they do not matter here.
string(REGEX REPLACE "[][;\\\\]" "_" listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")

# A suite's line starts in column 0 ("Suite." or "Instance/Suite.", a typed suite's followed by
# "  # TypeParam = ..."); its tests' lines are indented. GoogleTest's gtest_main prints "Running
# main() from ..." first.
set(suites "")
foreach(line IN LISTS lines)
  if(line STREQUAL "" OR line MATCHES "^Running main\\(\\) from ")
    continue()
  elseif(line MATCHES "^ ")
    if(NOT suites)
      message(FATAL_ERROR "A test before any suite in the listing of ${EXECUTABLE}: ${line}")
    endif()
    math(EXPR tests_${suite_index} "${tests_${suite_index}} + 1")
  elseif(line MATCHES "^([^ ]+)\\.")
    list(APPEND suites "${CMAKE_MATCH_1}")
    list(LENGTH suites suite_index)
    set(tests_${suite_index} 0)
  else()
    message(FATAL_ERROR "Unexpected line in the test listing of ${EXECUTABLE}: ${line}")
  endif()
endforeach()
if(NOT suites)
  message(FATAL_ERROR "${EXECUTABLE} lists no tests")
endif()

# COST orders a fresh build's first run (CTest then measures each test's time): suites that take
# long start first, so that two cores are not left with one long suite at the end.
set(body "# Written by cmake/TestSuitesList.cmake from ${EXECUTABLE} --gtest_list_tests.\n")
set(index 0)
foreach(suite IN LISTS suites)
  math(EXPR index "${index} + 1")
  math(EXPR cost "${tests_${index}} * ${COST_PER_TEST}")
  string(APPEND body
    "add_test([==[${suite}]==] \"${EXECUTABLE}\" [==[--gtest_filter=${suite}.*]==])\n"
    "set_tests_properties([==[${suite}]==] PROPERTIES"
    " WORKING_DIRECTORY \"${WORKING_DIRECTORY}\" LABELS \"${LABELS}\" TIMEOUT ${TIMEOUT} COST ${cost}"
    " SKIP_REGULAR_EXPRESSION [==[\\[ ALL SKIPPED \\]]==])\n")
endforeach()
file(WRITE "${OUTPUT}" "${body}")
