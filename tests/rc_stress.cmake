# Two-process RC tests through the public verbs API (libsoftrnic), with the
# link fault injector switched on by the tests themselves.
foreach(t test_rc_stress test_rc_passive test_rc_dereg)
  add_executable(${t} ${t}.c rc_test_conn.c)
  target_link_libraries(${t} PRIVATE softrnic)
  target_include_directories(${t} PRIVATE ${IBVERBS_INCLUDE})
endforeach()
