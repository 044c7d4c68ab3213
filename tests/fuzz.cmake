# Fuzz harnesses for every parser of untrusted input.  Each harness is a
# LLVMFuzzerTestOneInput() in tests/fuzz_<name>.c.
#
# srn_fuzz_target(name RUNS n SOURCES src... [SEEDS file...])
#   - always: `name` = harness + tests/helpers/fuzz_driver.c (a seeded, bounded
#     mutation loop) linked against srn_static, run by CTest with RUNS
#     inputs; in the ASan build that is a sanitizer-checked fuzz pass.
#   - with Clang: also `name_libfuzzer`, the same harness under libFuzzer
#     (coverage-guided), for long runs by hand; not run by CTest.
function(srn_fuzz_target name)
  cmake_parse_arguments(F "" "RUNS" "SOURCES;SEEDS" ${ARGN})
  if(NOT F_RUNS)
    set(F_RUNS 20000)
  endif()
  add_executable(${name} ${F_SOURCES} ${CMAKE_CURRENT_SOURCE_DIR}/helpers/fuzz_driver.c)
  target_link_libraries(${name} PRIVATE srn_static)
  add_test(NAME ${name} COMMAND ${name} -runs=${F_RUNS} -max_total_time=60 ${F_SEEDS})
  set_tests_properties(${name} PROPERTIES TIMEOUT 180 LABELS fuzz)
  if(CMAKE_C_COMPILER_ID STREQUAL "Clang")
    add_executable(${name}_libfuzzer ${F_SOURCES})
    target_link_libraries(${name}_libfuzzer PRIVATE srn_static)
    target_compile_options(${name}_libfuzzer PRIVATE -fsanitize=fuzzer)
    target_link_options(${name}_libfuzzer PRIVATE -fsanitize=fuzzer)
  endif()
endfunction()
