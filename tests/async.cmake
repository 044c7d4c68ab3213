# Async events hold the object they name, as uverbs: destroying a QP
# withdraws its unread events and waits for read ones to be acknowledged.
add_executable(test_async_events ${CMAKE_CURRENT_LIST_DIR}/test_async_events.c
  ${CMAKE_CURRENT_LIST_DIR}/helpers/rc_test_conn.c)
target_link_libraries(test_async_events PRIVATE softrnic Threads::Threads)
target_include_directories(test_async_events PRIVATE ${IBVERBS_INCLUDE})
foreach(mode withdrawn held kinds)
  add_test(NAME async_events_${mode} COMMAND test_async_events ${mode})
  set_tests_properties(async_events_${mode} PROPERTIES TIMEOUT 60
    LABELS "unit;fast;tsan")
endforeach()
