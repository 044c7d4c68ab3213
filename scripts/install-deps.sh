#!/bin/bash
# scripts/install-deps.sh - install what softrnic builds and tests with, from
# Debian's packages (Debian 12).  Does nothing when everything is present;
# otherwise needs root or sudo.  Why each package is needed: README.md.
#
#   scripts/install-deps.sh [PACKAGE...]
#
# Packages named as arguments are installed as well: .ci/run adds those only
# some tests use (README.md's rows marked CI), which are not installed here
# by default.
set -euo pipefail

PACKAGES=(
	build-essential cmake pkg-config    # compiler (with libasan/libubsan/libtsan), build
	libibverbs-dev                      # <infiniband/verbs.h>: the ABI we implement
	ibverbs-utils ibverbs-providers     # unmodified ibv_* binaries the tests and demo run
	librdmacm-dev rdmacm-utils librdmacm1  # rdma_cma.h for librdmacm.so.1; unmodified rdmacm programs the tests run
	libisal-dev                         # ISA-L: fast (SIMD) CRC32 for the ICRC
	zlib1g-dev                          # zlib: the reference CRC32 in the ICRC test
	iproute2                            # ip netns / veth / ss for the tests
	tshark                              # dissects captured RoCEv2 packets
	python3                             # test helpers
	ucx-utils                           # UCX 1.13: ucx_info, ucx_perftest over softrnic (tests, bench)
	libfabric-bin                       # libfabric 1.17: fi_info, fi_pingpong over softrnic (tests)
	perftest qperf                      # ib_*_bw/lat -R and qperf -cm1 over our librdmacm (tests)
	"$@"
)

missing=()
for p in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
echo "=== installing: ${missing[*]}"
timeout 300 $SUDO apt-get update
timeout 600 $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
