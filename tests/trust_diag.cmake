# Trust boundaries of the diagnostic segments (issue 10, items 2 and 3):
# another user gets nothing out of them, nothing planted in the segment
# directory hangs or fools the library or the tools, dead processes'
# segments stay bounded, and the tools' segment reader survives any bytes.
srn_script_test(trust_diag_other_user test_trust_diag_other_user.sh)
srn_script_test(trust_diag_planted test_trust_diag_planted.sh)
srn_script_test(trust_diag_shrink test_trust_diag_shrink.sh)
srn_script_test(trust_diag_sweep test_trust_diag_sweep.sh)
# Each runs short commands under `timeout`; a hang is the bug they catch.
set_tests_properties(trust_diag_other_user trust_diag_planted trust_diag_shrink trust_diag_sweep
  PROPERTIES TIMEOUT 180)

# Cuts a file to a size and back, as fast as it can, for a bounded time
# (test_trust_diag_shrink.sh).
add_executable(test_trust_diag_shrinker helpers/test_trust_diag_shrinker.c)

srn_fuzz_target(fuzz_diag_seg RUNS 20000
  SOURCES fuzz_diag_seg.c ${CMAKE_SOURCE_DIR}/tools/diag_seg.c)
target_include_directories(fuzz_diag_seg PRIVATE ${CMAKE_SOURCE_DIR}/tools)
if(TARGET fuzz_diag_seg_libfuzzer)
  target_include_directories(fuzz_diag_seg_libfuzzer PRIVATE ${CMAKE_SOURCE_DIR}/tools)
endif()

# The fast tier (each under ~2 s; ctest -L fast).
set_property(TEST trust_diag_other_user trust_diag_planted trust_diag_sweep
  fuzz_diag_seg APPEND PROPERTY LABELS fast)
