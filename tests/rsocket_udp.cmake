# Datagram rsockets (src/rsocket/dgram*.c, issue 12): the two headers alone,
# a fuzz pass over both, and two processes through `softrnic run`: Debian's
# udpong on loopback and between namespaces, a plain UDP program under
# Debian's librspreload.so, and a live server fed datagrams that are no
# rsocket's (tests/test_rsocket_udp.sh says what each mode runs).
srn_unit_test(test_rsocket_dgram_proto test_rsocket_dgram_proto.c
  ${CMAKE_SOURCE_DIR}/src/rsocket/dgram_proto.c)
srn_fuzz_target(fuzz_rsocket_dgram RUNS 50000 SOURCES fuzz_rsocket_dgram.c
  ${CMAKE_SOURCE_DIR}/src/rsocket/dgram_proto.c)

# rsocket_udp_echo links nothing of RDMA (librspreload brings it in);
# rsocket_udp_inject is a hostile UD peer on our librdmacm and libibverbs.
add_executable(rsocket_udp_echo helpers/rsocket_udp_echo.c)
add_executable(rsocket_udp_inject helpers/rsocket_udp_inject.c)
target_link_libraries(rsocket_udp_inject PRIVATE rdmacm ibverbs)

foreach(mode loopback netns preload malformed)
  add_test(NAME rsocket_udp_${mode} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_rsocket_udp.sh ${mode})
  set_tests_properties(rsocket_udp_${mode} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
    ENVIRONMENT "SRN_BUILD=${CMAKE_BINARY_DIR};SRN_SRC=${CMAKE_SOURCE_DIR}"
    LABELS e2e)
endforeach()

# The fast tier (each under ~2 s; ctest -L fast).
set_property(TEST test_rsocket_dgram_proto fuzz_rsocket_dgram APPEND PROPERTY LABELS fast)
