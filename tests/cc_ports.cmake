# Flow entropy for ECMP (issue 16, item 4): each QP's packets leave from
# its own UDP source port (link/udp_ports.h).
srn_unit_test(test_cc_ports test_cc_ports.c)
set_property(TEST test_cc_ports APPEND PROPERTY LABELS fast)
# Two processes on loopback: the ports in a trace match rxe's formula, the
# batched path keeps its ICRCs right, SOFTRNIC_SRC_PORTS=0 turns it off.
srn_script_test(test_cc_ports_loop test_cc_ports_loop.sh)
# Through `softrnic switch --ecmp` between namespaces: 16 QPs take both
# links; with the option off, one flow on one link.
srn_script_test(test_cc_ports_ecmp test_cc_ports_ecmp.sh)
