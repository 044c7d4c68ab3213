# Tests of the wire/ layer (headers, opcode table, ICRC).  Pure functions:
# no sockets, no threads.  The frame vectors are tests/data/roce-frames.tsv
# (docs/wire.md §5.3).
set(SRN_WIRE_TSV ${SRN_TESTDATA}/roce-frames.tsv)

srn_unit_test(test_wire_icrc test_wire_icrc.c helpers/test_wire_util.c)
# zlib's byte-table CRC32 is the independent reference for ISA-L's SIMD one.
find_package(ZLIB REQUIRED)
target_link_libraries(test_wire_icrc PRIVATE ZLIB::ZLIB)
srn_unit_test(test_wire_pkt test_wire_pkt.c helpers/test_wire_util.c)
srn_unit_test(test_wire_robust test_wire_robust.c helpers/test_wire_util.c)

# srn_unit_test runs the program without arguments, so the vector file is
# also compiled in as the default; argv[1] overrides it.
foreach(t test_wire_icrc test_wire_pkt)
  target_compile_definitions(${t} PRIVATE SRN_FRAMES_TSV="${SRN_WIRE_TSV}")
endforeach()

# The packet parser under the fuzz driver (CTest, every build) and, with
# Clang, under libFuzzer (fuzz_pkt_parse_libfuzzer, by hand).
srn_fuzz_target(fuzz_pkt_parse RUNS 200000 SOURCES fuzz_pkt_parse.c)

# The fast tier (each under ~2 s; ctest -L fast).
set_property(TEST test_wire_icrc test_wire_pkt test_wire_robust
  fuzz_pkt_parse APPEND PROPERTY LABELS fast)
