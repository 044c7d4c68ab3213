# A good guest in its host process (issue 23): softrnic's threads block
# every signal; the progress thread survives a missing epoll_pwait2 and
# never stops without a word and IBV_EVENT_DEVICE_FATAL.
add_executable(test_guest test_guest.c helpers/rc_test_conn.c)
target_link_libraries(test_guest PRIVATE rdmacm softrnic Threads::Threads)
target_include_directories(test_guest PRIVATE ${IBVERBS_INCLUDE})
add_library(epoll_fail_preload MODULE helpers/epoll_fail_preload.c)
add_test(NAME guest_signals COMMAND test_guest signals)
set_tests_properties(guest_signals PROPERTIES TIMEOUT 60 LABELS "unit;fast;tsan")
srn_script_test(guest_epoll test_guest_epoll.sh LABELS "unit;fast")
srn_script_test(guest_crash test_guest_crash.sh LABELS "unit;fast")

# The progress thread wakes for a deadline an application thread sets
# while it sleeps (an ACK timer, a packet the fault injector holds).
add_executable(test_progress_wake test_progress_wake.c helpers/rc_test_conn.c)
target_link_libraries(test_progress_wake PRIVATE softrnic Threads::Threads)
target_include_directories(test_progress_wake PRIVATE ${IBVERBS_INCLUDE})
add_test(NAME progress_wake_timer COMMAND test_progress_wake timer)
add_test(NAME progress_wake_held COMMAND test_progress_wake held)
set_tests_properties(progress_wake_timer PROPERTIES TIMEOUT 60 LABELS "unit;fast;tsan"
  ENVIRONMENT "SOFTRNIC_SHM=0;SOFTRNIC_FAULTS=tx.drop=100,opcode=0x0a;SOFTRNIC_DEVICES=name=softrnic0,addr=auto,share=0")
set_tests_properties(progress_wake_held PROPERTIES TIMEOUT 60 LABELS "unit;fast;tsan"
  ENVIRONMENT "SOFTRNIC_SHM=0;SOFTRNIC_FAULTS=tx.delay=100,delay_us=5000,opcode=0x0a;SOFTRNIC_DEVICES=name=softrnic0,addr=auto,share=0")

# A held ACK leaves before the packets of the post it waited for.
add_executable(test_ack_order test_ack_order.c helpers/rc_test_conn.c)
target_link_libraries(test_ack_order PRIVATE softrnic Threads::Threads)
target_include_directories(test_ack_order PRIVATE ${IBVERBS_INCLUDE})
add_test(NAME ack_order_rings COMMAND test_ack_order)
add_test(NAME ack_order_udp COMMAND test_ack_order)
set_tests_properties(ack_order_rings ack_order_udp PROPERTIES TIMEOUT 60 LABELS "e2e;fast;tsan")
set_tests_properties(ack_order_udp PROPERTIES ENVIRONMENT "SOFTRNIC_SHM=0;SOFTRNIC_STATS=1")
