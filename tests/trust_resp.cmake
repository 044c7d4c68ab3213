# Issue 10, items 5-7: what a connected peer or a remote sender can do to
# the responder.  Each test fails on the build before its fix.

# srn_trust_resp_test(name src...): a verbs program linked against the
# library; SOFTRNIC_LOG=warn so a failure shows the NAK explanations.
function(srn_trust_resp_test name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE softrnic)
  target_include_directories(${name} PRIVATE ${IBVERBS_INCLUDE})
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120
    ENVIRONMENT "SOFTRNIC_LOG=warn")
endfunction()

# Item 5: an XRC SRQ an XRC receive QP uses cannot be destroyed (EBUSY),
# and keeps delivering; it goes after the QP.
srn_trust_resp_test(test_trust_resp_xrc_srq test_trust_resp_xrc_srq.c rc_test_conn.c)
