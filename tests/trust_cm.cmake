# A remote peer floods a shared address's QP1 with CM REQs for ports
# nobody listens on (cm/held.c, link/udp_group_fwd.c): the held REQs stay
# bounded, each REQ gets at most one REJ per copy, malformed ones none,
# the members live and keep their memory, and a legitimate rping client
# connects during and after (test_trust_cm_flood.sh).
add_executable(test_trust_cm_flood test_trust_cm_flood.c helpers/cm_req_craft.c
               ${CMAKE_SOURCE_DIR}/src/cm/mad.c)
target_link_libraries(test_trust_cm_flood PRIVATE srn_static)
srn_script_test(test_trust_cm_flood test_trust_cm_flood.sh)
set_tests_properties(test_trust_cm_flood PROPERTIES TIMEOUT 180)
