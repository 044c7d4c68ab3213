# A thread blocked in ibv_get_cq_event serves the NIC itself
# (src/engine/wait.c), over the rings and over UDP (SOFTRNIC_SHM=0).
#
# One wake-up per hop, counted (SOFTRNIC_STATS) around Debian's unmodified
# ibv_rc_pingpong -e.
srn_script_test(one_wakeup_rings test_wait_one_wakeup.sh LABELS e2e)
srn_script_test(one_wakeup_udp test_wait_one_wakeup.sh LABELS e2e)
set_property(TEST one_wakeup_udp APPEND PROPERTY ENVIRONMENT SOFTRNIC_SHM=0)

# Signals (EINTR, SA_RESTART) and wake-ups by other threads (the bell, a
# second waiter) of such a wait.  Linked static: the test reads the
# device's counters to know the socket owner's wait was the one tested.
add_executable(test_wait_signals test_wait_signals.c helpers/rc_test_conn.c)
target_link_libraries(test_wait_signals PRIVATE srn_static Threads::Threads)
foreach(mode eintr restart bell_flush bell two_waiters stopcont)
  foreach(link rings udp)
    add_test(NAME wait_signals_${mode}_${link} COMMAND test_wait_signals ${mode})
    set_tests_properties(wait_signals_${mode}_${link} PROPERTIES TIMEOUT 60
      LABELS "unit;fast;tsan")
  endforeach()
  set_property(TEST wait_signals_${mode}_udp APPEND PROPERTY ENVIRONMENT SOFTRNIC_SHM=0)
endforeach()

# A program that sleeps in its own poll or epoll on the channel's fd
# serves the device in that sleep (verbs/verbs_fdwait.c), and the calls
# still answer as libc's: events, EINTR, timeouts, the program's own fds.
# Linked static: the test reads the device's counters.
add_executable(test_wait_fds test_wait_fds.c helpers/rc_test_conn.c)
target_link_libraries(test_wait_fds PRIVATE srn_static Threads::Threads)
# The cancel cases stay out of the TSan pass: twice in two CI runs on
# 2026-12-05 a wait after the cancelled thread's did not serve the device
# there, not reproduced in 40 TSan runs beside a hog (known-issues.md).
foreach(mode epoll epoll_pwait2 poll ppoll eintr timeout other_fd oneshot cancel)
  foreach(link rings udp)
    add_test(NAME wait_fds_${mode}_${link} COMMAND test_wait_fds ${mode})
    set(labels "unit;fast;tsan")
    if(mode STREQUAL "cancel")
      set(labels "unit;fast")
    endif()
    set_tests_properties(wait_fds_${mode}_${link} PROPERTIES TIMEOUT 90 LABELS "${labels}")
  endforeach()
  set_property(TEST wait_fds_${mode}_udp APPEND PROPERTY ENVIRONMENT SOFTRNIC_SHM=0)
endforeach()

# A thread cancelled while it polls a CQ leaves the device usable: no
# cancellation takes effect under the device lock.
add_executable(test_cancel_in_verbs test_cancel_in_verbs.c)
target_link_libraries(test_cancel_in_verbs PRIVATE srn_static Threads::Threads)
target_include_directories(test_cancel_in_verbs PRIVATE ${IBVERBS_INCLUDE} ${CMAKE_CURRENT_SOURCE_DIR})
foreach(link rings udp)
  add_test(NAME cancel_in_verbs_${link} COMMAND test_cancel_in_verbs)
  set_tests_properties(cancel_in_verbs_${link} PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77
    LABELS "unit;fast")
endforeach()
set_property(TEST cancel_in_verbs_udp APPEND PROPERTY ENVIRONMENT SOFTRNIC_SHM=0)
