# A registered block freed or realloc'd before dereg (issue 27 item 2):
# the peer reaches the registered pages, never the program's new memory,
# and the target lives.  Per path: same-host direct placement through the
# mapping, the system-call copy (SOFTRNIC_DIRECT_MAP=0), the rings' responder
# (SOFTRNIC_DIRECT=0) and UDP (SOFTRNIC_SHM=0).
add_executable(test_mr_freed test_mr_freed.c helpers/rc_test_conn.c)
target_link_libraries(test_mr_freed PRIVATE softrnic)
target_include_directories(test_mr_freed PRIVATE ${IBVERBS_INCLUDE})
foreach(path direct syscall rings udp)
  add_test(NAME mr_freed_${path} COMMAND test_mr_freed)
  set_tests_properties(mr_freed_${path} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 180
    LABELS "unit;fast")
endforeach()
set_property(TEST mr_freed_syscall APPEND PROPERTY ENVIRONMENT SOFTRNIC_DIRECT_MAP=0)
set_property(TEST mr_freed_rings APPEND PROPERTY ENVIRONMENT SOFTRNIC_DIRECT=0)
set_property(TEST mr_freed_udp APPEND PROPERTY ENVIRONMENT SOFTRNIC_SHM=0)
