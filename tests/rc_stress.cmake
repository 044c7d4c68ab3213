# Two-process RC tests through the public verbs API (libsoftrnic): a
# stress mix under the link fault injector, one-sided traffic against a
# target that never calls in, deregistration under a Write stream, and
# Debian's ibv_rc_pingpong with packet loss.  Each process opens its own
# device, so the traffic is real UDP between 127.0.0.N addresses.
foreach(t test_rc_stress test_rc_passive test_rc_dereg)
  add_executable(${t} ${t}.c helpers/rc_test_conn.c)
  target_link_libraries(${t} PRIVATE softrnic)
  target_include_directories(${t} PRIVATE ${IBVERBS_INCLUDE})
endforeach()

# srn_rc_test(name prog args...): register one run of a two-process test.
# srn_rc_test(name prog args... [LABELS l...]): labelled e2e (two
# processes) unless LABELS says otherwise.
function(srn_rc_test name prog)
  cmake_parse_arguments(R "" "" "LABELS" ${ARGN})
  if(NOT R_LABELS)
    set(R_LABELS e2e)
  endif()
  add_test(NAME ${name} COMMAND ${prog} ${R_UNPARSED_ARGUMENTS})
  # On failure the test prints each QP's event log through the tool,
  # the error explanations (SOFTRNIC_LOG=warn) and the device counters.
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 240
    ENVIRONMENT "SRN_SOFTRNIC_TOOL=$<TARGET_FILE:softrnic-tool>;SOFTRNIC_LOG=warn;SOFTRNIC_STATS=1"
    LABELS "${R_LABELS}")
endfunction()

# 20 000 mixed operations under the default faults (5 % drop, 2 %
# duplicate, 2 % reorder per packet, half at the sender's tx, half at the
# receiver's rx): about 20 s, more under ASan.  Every lost or held tail
# packet costs a 537 ms ACK timeout (the test's timeout 17, long enough
# that a peer process starved for seconds does not spend retry_cnt), about
# 150 of them per side, so the op count is a fifth of the loss-free runs'.
# PSN wrap-around on 5 000 (it wraps after the first 16 packets).
srn_rc_test(rc_stress test_rc_stress --ops 20000 LABELS stress)
srn_rc_test(rc_stress_psn_wrap test_rc_stress --ops 5000 --psn 0xfffff0 LABELS stress)
# 100 000 operations without faults: through the same-host rings (a
# fraction of a second), and on the UDP link with GSO/GRO (about a second).
srn_rc_test(rc_stress_100k_lossfree test_rc_stress --ops 100000 --faults none LABELS stress)
srn_rc_test(rc_stress_100k_udp test_rc_stress --ops 100000 --faults none --udp LABELS stress)
# Regressions for transport bugs this test found, each narrowed down to
# the operations and faults that trigger it:
#   READ response packets lost in the middle of a multi-packet READ
#   (5 % at each end, 9.75 % in all: with 10 % at each end a resent READ
#   failed 19 % of the time, and 7 such retries in a row after some loss
#   came to about 3e-3 per run)
srn_rc_test(rc_stress_read_resp_loss test_rc_stress --ops 2000 --kinds READ_P
  --faults "seed=1,drop=5,opcode=0x0d|0x0e" LABELS stress)
#   duplicated READ responses and atomic ACKs (the next WQE got BAD_RESP_ERR)
srn_rc_test(rc_stress_dup_resp test_rc_stress --ops 2000 --kinds READ_W,FAA,CAS,WRITE
  --faults "seed=1,dup=100,opcode=0x10|0x12" LABELS stress)
#   go-back-N across atomics interleaved with multi-packet SENDs (loss
#   split between the two injectors, as in the default faults)
srn_rc_test(rc_stress_atomic_send_loss test_rc_stress --ops 4000 --kinds FAA,SEND
  --faults "seed=42,tx.drop=2.5,rx.drop=2.5" LABELS stress)

srn_rc_test(rc_passive_sleep test_rc_passive sleep)
srn_rc_test(rc_passive_spin test_rc_passive spin)
srn_rc_test(rc_passive_faults test_rc_passive sleep --faults "seed=5,drop=2,dup=1,reorder=1")
srn_rc_test(rc_dereg test_rc_dereg)

srn_script_test(rc_pingpong_faults test_rc_pingpong_faults.sh)

# ACKs held for the application's next post leave when it never comes.
add_executable(test_rc_held_ack test_rc_held_ack.c helpers/rc_test_conn.c)
target_link_libraries(test_rc_held_ack PRIVATE softrnic)
target_include_directories(test_rc_held_ack PRIVATE ${IBVERBS_INCLUDE})
srn_script_test(rc_held_ack test_rc_held_ack.sh)

# The same-host shared-memory link: used, woken, optional, flow-controlled,
# and a killed peer fails its partner's QP and leaves no inbox behind.
add_executable(test_shm_peer_killed test_shm_peer_killed.c helpers/rc_test_conn.c)
target_link_libraries(test_shm_peer_killed PRIVATE softrnic)
target_include_directories(test_shm_peer_killed PRIVATE ${IBVERBS_INCLUDE})
srn_script_test(shm_link test_shm_link.sh)
# A same-host receiver stopped for 2 s (SIGSTOP, as a starved process):
# ACK timeouts wait for it instead of spending the sender's retries.
srn_script_test(shm_slow_peer test_shm_slow_peer.sh)

# scripts/test.sh runs these under ThreadSanitizer (-L tsan).
set_property(TEST rc_stress_100k_lossfree rc_stress_100k_udp rc_held_ack
  APPEND PROPERTY LABELS tsan)

# The fast tier (each under ~2 s; ctest -L fast).
set_property(TEST rc_passive_sleep rc_passive_spin rc_dereg rc_held_ack
  APPEND PROPERTY LABELS fast)
