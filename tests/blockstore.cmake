# The block store example (issue 15): examples/blockstore end to end, one
# test per path: the TCP twin, softrnic's shared-memory rings, its UDP
# link (SOFTRNIC_SHM=0) and two network namespaces (root only).  Each
# checks every block, moves the server's cache twice under four clients,
# kills a writer mid-run, and reads the whole device back before and
# after a server restart.
foreach(mode tcp shm udp netns)
  add_test(NAME blockstore_${mode}
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_blockstore.sh ${mode})
  set_tests_properties(blockstore_${mode} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
    ENVIRONMENT "SRN_BUILD=${CMAKE_BINARY_DIR};SRN_SRC=${CMAKE_SOURCE_DIR}"
    LABELS e2e)
endforeach()

# The cache and the store alone, against a naive model, plus crash
# recovery (a damaged in-place block replayed, a torn journal dropped).
set(BS_DIR ${CMAKE_SOURCE_DIR}/examples/blockstore)
srn_unit_test(test_blockstore_cache test_blockstore_cache.c
  ${BS_DIR}/cache.c ${BS_DIR}/store.c ${BS_DIR}/crc32c.c)
target_include_directories(test_blockstore_cache PRIVATE ${BS_DIR})
set_property(TEST test_blockstore_cache APPEND PROPERTY LABELS fast)
