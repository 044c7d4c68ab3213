# rsockets (src/rsocket/, issue 12): the wire format alone, a fuzz pass over
# the peer's connect data, and two processes through `softrnic run`:
# Debian's rstream and riostream, our own checks of rpoll and of peers
# closing or dying mid-stream, and a plain TCP program under Debian's
# librspreload.so.
srn_unit_test(test_rsocket_proto test_rsocket_proto.c ${CMAKE_SOURCE_DIR}/src/rsocket/proto.c)
srn_fuzz_target(fuzz_rsocket_conn RUNS 50000 SOURCES fuzz_rsocket_conn.c
  ${CMAKE_SOURCE_DIR}/src/rsocket/proto.c)

# rsocket_check links our librdmacm.so.1 as an rsockets program does;
# rsocket_tcp_echo links nothing of RDMA (librspreload brings it in).
add_executable(rsocket_check rsocket_check.c)
target_link_libraries(rsocket_check PRIVATE rdmacm)
add_executable(rsocket_tcp_echo helpers/rsocket_tcp_echo.c)

foreach(mode rstream riostream check killed preload)
  add_test(NAME rsocket_${mode} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_rsocket.sh ${mode})
  set_tests_properties(rsocket_${mode} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
    ENVIRONMENT "SRN_BUILD=${CMAKE_BINARY_DIR};SRN_SRC=${CMAKE_SOURCE_DIR}"
    LABELS e2e)
endforeach()

# The fast tier (each under ~2 s; ctest -L fast).
set_property(TEST test_rsocket_proto APPEND PROPERTY LABELS fast)
