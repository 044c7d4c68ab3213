# Connection manager (librdmacm.so.1): codec, fuzzing, unmodified rdmacm-utils.
srn_unit_test(test_cm_mad test_cm_mad.c ${CMAKE_SOURCE_DIR}/src/cm/mad.c)
srn_fuzz_target(fuzz_cm_mad RUNS 50000 SOURCES fuzz_cm_mad.c ${CMAKE_SOURCE_DIR}/src/cm/mad.c)
srn_script_test(cm_symbols test_cm_symbols.sh)
srn_script_test(cm_rdmacm_utils test_cm_rdmacm_utils.sh)
srn_script_test(cm_psn_wire test_cm_psn_wire.sh)

# srn_cm_test(name src): a C program linked against our librdmacm.so.1, as
# an rdma_cm application is.
function(srn_cm_test name src)
  add_executable(${name} ${src})
  target_link_libraries(${name} PRIVATE rdmacm Threads::Threads)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60
    LABELS unit)
endfunction()
srn_cm_test(test_cm_destroyed_channel test_cm_destroyed_channel.c)
srn_cm_test(test_cm_destroy_id_held_event test_cm_destroy_id_held_event.c)

# The fast tier (each under ~2 s; ctest -L fast).
set_property(TEST test_cm_mad fuzz_cm_mad cm_symbols
  test_cm_destroyed_channel test_cm_destroy_id_held_event
  APPEND PROPERTY LABELS fast)
