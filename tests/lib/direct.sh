# Sourceable: the common start of the direct-placement scripts
# (tests/test_direct*.sh).  Needs $bin (the test program) to be set.
# A private diag directory, the environment that chooses paths cleared,
# and counter: the sum of a SOFTRNIC_STATS counter over every process.
: "${SRN_BUILD:?}"
[ -x "$bin" ] || { echo "FAIL: $bin not built"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export SOFTRNIC_DIAG_DIR="$tmp/diag"
mkdir "$SOFTRNIC_DIAG_DIR"
unset SOFTRNIC_DEVICES SOFTRNIC_CONFIG SOFTRNIC_SHM SOFTRNIC_PCAP SOFTRNIC_FAULTS \
    SOFTRNIC_DIRECT SOFTRNIC_DIRECT_ATOMIC SOFTRNIC_DIRECT_ATOMIC_MAX \
    SOFTRNIC_DIRECT_MAP SOFTRNIC_DIRECT_MAP_MAX

# counter FILE NAME
counter() {
    awk -v n="$2" '$1 == "softrnic" && $3 == n { v += $4 } END { print v + 0 }' "$1"
}
