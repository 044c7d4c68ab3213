# End-to-end: Debian's unmodified RDMA programs through `softrnic run`.
srn_script_test(rc_pingpong test_rc_pingpong.sh)
srn_script_test(rc_pingpong_netns test_rc_pingpong_netns.sh)
srn_script_test(other_pingpongs test_other_pingpongs.sh)
