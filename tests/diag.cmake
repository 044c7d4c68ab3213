# diag/: the diagnostic segment (tests/test_diag_shm.c), and the tools that
# read it from outside the process: `softrnic stat`, `res`, `explain`.
srn_unit_test(test_diag_shm test_diag_shm.c)

# A process that writes a segment through the diag API alone (no device,
# no hooks): lets test_diag_tools check the tools' output exactly.
add_executable(diag_seg_writer helpers/diag_seg_writer.c)
target_link_libraries(diag_seg_writer PRIVATE srn_static)

# A verbs program that registers 3 MRs, never deregisters them and sleeps:
# what `softrnic res` must show through the library's own hooks.
add_executable(diag_leak_prog helpers/diag_leak_prog.c)
target_link_libraries(diag_leak_prog PRIVATE softrnic)
target_include_directories(diag_leak_prog PRIVATE ${IBVERBS_INCLUDE})

srn_script_test(diag_tools test_diag_tools.sh)
srn_script_test(diag_stat test_stat.sh)
srn_script_test(diag_res test_res.sh)

# scripts/test.sh runs these under ThreadSanitizer (-L tsan).
set_property(TEST test_diag_shm APPEND PROPERTY LABELS tsan)

# The fast tier (each under ~2 s; ctest -L fast).
set_property(TEST test_diag_shm diag_stat diag_res
  APPEND PROPERTY LABELS fast)
