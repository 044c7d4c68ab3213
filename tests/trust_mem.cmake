# Registered memory (issue 10 items 2, 8, 13): unpredictable keys, no
# registration of memory that is not there, no access to memory unmapped
# under a registration, and ibv_rereg_mr.
add_executable(test_trust_mem test_trust_mem.c helpers/rc_test_conn.c)
target_link_libraries(test_trust_mem PRIVATE softrnic)
target_include_directories(test_trust_mem PRIVATE ${IBVERBS_INCLUDE})
foreach(t keys fault unmap rereg guess race detach)
  add_test(NAME trust_mem_${t} COMMAND test_trust_mem ${t})
  set_tests_properties(trust_mem_${t} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120
    LABELS e2e)
endforeach()

# The fast tier (each under ~2 s; ctest -L fast).
set_property(TEST trust_mem_keys trust_mem_fault trust_mem_unmap
  trust_mem_rereg trust_mem_guess trust_mem_race trust_mem_detach
  APPEND PROPERTY LABELS fast)
