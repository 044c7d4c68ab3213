# NVMe over Fabrics (issue 28): examples/nvmf, softrnic-nvmf.
# End to end: one target (NVMe/RDMA and NVMe/TCP on one port), perf and
# probe clients, in three modes: shm (softrnic's same-host rings, target
# polling), udp (SOFTRNIC_SHM=0: RoCEv2 over UDP loopback, target
# event-driven), tcp (NVMe/TCP from the same target, with digests);
# netns and tcp_netns: target and hosts in two network namespaces over a
# veth pair (root only, else skipped); shm_mt, udp_mt and tcp_mt: shm, udp
# and tcp with the target on two I/O threads (--cores 0,1).  The *_mt ones
# are in the tsan label: the threads share controllers and namespaces.
set(NVMF_DIR ${CMAKE_SOURCE_DIR}/examples/nvmf)
if(TARGET softrnic-nvmf)
  foreach(mode shm udp tcp netns tcp_netns shm_mt udp_mt tcp_mt)
    add_test(NAME nvmf_${mode} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_nvmf.sh ${mode})
    set_tests_properties(nvmf_${mode} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120
      ENVIRONMENT "SRN_BUILD=${CMAKE_BINARY_DIR};SRN_SRC=${CMAKE_SOURCE_DIR}"
      LABELS e2e)
  endforeach()
  set_property(TEST nvmf_shm_mt nvmf_udp_mt nvmf_tcp_mt APPEND PROPERTY LABELS tsan)
endif()

# The parsers: NVMe/TCP PDU headers and the rdma_cm private data; and
# command capsules through the SGL door into the whole NVMe core.
set(NVMF_SEEDS ${SRN_TESTDATA}/fuzz/nvmf)
srn_fuzz_target(fuzz_nvmf_wire SOURCES fuzz_nvmf_wire.c ${NVMF_DIR}/wire.c
  SEEDS ${NVMF_SEEDS}/wire_icreq.bin ${NVMF_SEEDS}/wire_cmd.bin ${NVMF_SEEDS}/wire_h2c.bin
        ${NVMF_SEEDS}/wire_cm_req.bin)
target_include_directories(fuzz_nvmf_wire PRIVATE ${NVMF_DIR})
srn_fuzz_target(fuzz_nvmf_capsule SOURCES fuzz_nvmf_capsule.c ${NVMF_DIR}/wire.c
  ${NVMF_DIR}/core.c ${NVMF_DIR}/admin.c ${NVMF_DIR}/io.c
  SEEDS ${NVMF_SEEDS}/capsule_io_write_incap.bin ${NVMF_SEEDS}/capsule_admin_mix.bin
        ${NVMF_SEEDS}/capsule_io_dsm_wz.bin)
target_include_directories(fuzz_nvmf_capsule PRIVATE ${NVMF_DIR})
if(TARGET fuzz_nvmf_wire_libfuzzer)
  target_include_directories(fuzz_nvmf_wire_libfuzzer PRIVATE ${NVMF_DIR})
  target_include_directories(fuzz_nvmf_capsule_libfuzzer PRIVATE ${NVMF_DIR})
endif()

# The doors and the controller core directly: parser vectors, the status
# encoding, one controller's life (Connect, CC.EN, Identify offsets, the
# discovery log per host, CC.SHN, a keep-alive expiry).
srn_unit_test(test_nvmf_core test_nvmf_core.c ${NVMF_DIR}/wire.c ${NVMF_DIR}/core.c
  ${NVMF_DIR}/admin.c ${NVMF_DIR}/io.c)
target_include_directories(test_nvmf_core PRIVATE ${NVMF_DIR})
set_property(TEST test_nvmf_core APPEND PROPERTY LABELS fast)
