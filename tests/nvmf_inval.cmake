# NVMe/RDMA keyed SGLs that ask for invalidation (examples/nvmf, perf
# --invalidate): a type-2 memory window per command, each response a Send
# with Invalidate of its key, a stale key refused.  shm: same-host rings,
# target polling; udp: SOFTRNIC_SHM=0, RoCEv2 over UDP loopback, target
# event-driven.  Its own file so tests/nvmf.cmake stays untouched.
if(TARGET softrnic-nvmf)
  foreach(mode shm udp)
    add_test(NAME nvmf_invalidate_${mode}
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_nvmf_inval.sh ${mode})
    set_tests_properties(nvmf_invalidate_${mode} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120
      ENVIRONMENT "SRN_BUILD=${CMAKE_BINARY_DIR};SRN_SRC=${CMAKE_SOURCE_DIR}"
      LABELS e2e)
  endforeach()
endif()
