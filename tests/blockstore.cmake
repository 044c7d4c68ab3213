# The block store example (issue 15): examples/blockstore end to end.
# Each script runs one server and several client processes in one mode:
# tcp (the TCP twin), shm (softrnic's same-host rings), udp
# (SOFTRNIC_SHM=0) or netns (two network namespaces, root only).
function(bs_script_test name script)
  foreach(mode ${ARGN})
    add_test(NAME ${name}_${mode}
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/${script} ${mode})
    set_tests_properties(${name}_${mode} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
      ENVIRONMENT "SRN_BUILD=${CMAKE_BINARY_DIR};SRN_SRC=${CMAKE_SOURCE_DIR}"
      LABELS e2e)
  endforeach()
endfunction()

# Every block checked; the cache moved twice under four clients; a
# writer killed mid-run; the whole device read back before and after a
# server restart.
bs_script_test(blockstore test_blockstore.sh tcp shm udp netns)
# The rkey lifecycle done wrong on purpose (a client that keeps its first
# rkey across a cache move) and `softrnic explain` diagnosing it.
bs_script_test(blockstore_stale_rkey test_blockstore_stale.sh shm udp)
# Reads racing writers of the same LBAs: never torn, never going back;
# udp_lossy drops 2 % of the datagrams, so served reads are resent.
bs_script_test(blockstore_race test_blockstore_race.sh tcp shm udp udp_lossy)
# Per-connection memory windows: one revoked alone, then a cache move.
bs_script_test(blockstore_mw test_blockstore_mw.sh shm udp)

# The cache and the store alone, against a naive model, plus crash
# recovery (a damaged in-place block replayed, a torn journal dropped).
set(BS_DIR ${CMAKE_SOURCE_DIR}/examples/blockstore)
srn_unit_test(test_blockstore_cache test_blockstore_cache.c
  ${BS_DIR}/cache.c ${BS_DIR}/store.c ${BS_DIR}/crc32c.c)
target_include_directories(test_blockstore_cache PRIVATE ${BS_DIR})
set_property(TEST test_blockstore_cache APPEND PROPERTY LABELS fast)
