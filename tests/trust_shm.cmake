# Same-host link against other users and hostile same-user peers (issue 10,
# items 1 and 9): inbox names taken first, files of the wrong owner or mode,
# inboxes shrunk under their mappings, ring records that lie.
add_executable(test_trust_shm_plant ${CMAKE_CURRENT_LIST_DIR}/helpers/test_trust_shm_plant.c)
target_link_libraries(test_trust_shm_plant PRIVATE srn_static)
srn_script_test(test_trust_shm_inbox test_trust_shm_inbox.sh)
srn_unit_test(test_trust_shm_ring ${CMAKE_CURRENT_LIST_DIR}/test_trust_shm_ring.c)
# The ring reader under the fuzz driver: arbitrary rings, exactly sized.
srn_fuzz_target(fuzz_shm_ring RUNS 200000 SOURCES fuzz_shm_ring.c)

# The fast tier (each under ~2 s; ctest -L fast).
set_property(TEST test_trust_shm_ring fuzz_shm_ring APPEND PROPERTY LABELS fast)
