# A good guest in its host process (issue 23): softrnic's threads block
# every signal; the progress thread survives a missing epoll_pwait2 and
# never stops without a word and IBV_EVENT_DEVICE_FATAL.
add_executable(test_guest test_guest.c rc_test_conn.c)
target_link_libraries(test_guest PRIVATE rdmacm softrnic Threads::Threads)
target_include_directories(test_guest PRIVATE ${IBVERBS_INCLUDE})
add_library(epoll_fail_preload MODULE epoll_fail_preload.c)
add_test(NAME guest_signals COMMAND test_guest signals)
set_tests_properties(guest_signals PROPERTIES TIMEOUT 60 LABELS "unit;fast;tsan")
srn_script_test(guest_epoll test_guest_epoll.sh LABELS "unit;fast")
srn_script_test(guest_crash test_guest_crash.sh LABELS "unit;fast")
