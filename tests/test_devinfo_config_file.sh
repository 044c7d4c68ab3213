#!/bin/bash
# test_devinfo_config_file.sh - `softrnic devinfo` reads the device
# configuration with the library's own parser (link/config.c), so the UDP
# port it shows is the one the device bound, for a SOFTRNIC_CONFIG file as
# for SOFTRNIC_DEVICES (test_tool_devinfo.sh covers that one):
#
#   SOFTRNIC_CONFIG file:  # comment line
#                          name=cfga,addr=A1,port=P1,mtu=1500
#                          (blank line)
#                          addr=A2,port=P2   # no name: it is softrnic1
#
#   softrnic run -- softrnic devinfo -v -d softrnic1  ->  udp_address A2:P2
#   softrnic run -- softrnic devinfo -v -d cfga       ->  udp_address A1:P1
#
# Addresses are random in 127.0.0.0/8 and ports random in 20000..59999, a
# few tries, so a run beside other tests finds them free.
set -u
: "${SRN_BUILD:?SRN_BUILD must point at the build directory}"
SOFTRNIC="$SRN_BUILD/bin/softrnic"

bad=0
fail() { echo "FAIL: $*"; bad=1; }
ok() { echo "ok: $*"; }

[ -x "$SOFTRNIC" ] || { echo "FAIL: $SOFTRNIC not built"; exit 1; }
unset SOFTRNIC_DEVICES SOFTRNIC_PCAP
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# devinfo_addr DEV: the udp_address devinfo shows for DEV ("" if none).
devinfo_addr() {
	SOFTRNIC_CONFIG="$tmp/devices.conf" timeout 60 "$SOFTRNIC" run -- \
		"$SOFTRNIC" devinfo -v -d "$1" 2>"$tmp/err" |
		awk '$1 == "udp_address:" { print $2 }'
}

done_ok=0
for try in 1 2 3 4 5; do
	net="127.$((RANDOM % 200 + 20)).$((RANDOM % 200 + 20))"
	a1="$net.1" a2="$net.2"
	p1=$((20000 + RANDOM % 40000)) p2=$((20000 + RANDOM % 40000))
	printf '# two devices; the second is named by its index\n' >"$tmp/devices.conf"
	printf 'name=cfga,addr=%s,port=%s,mtu=1500\n\naddr=%s,port=%s   # softrnic1\n' \
		"$a1" "$p1" "$a2" "$p2" >>"$tmp/devices.conf"
	got2=$(devinfo_addr softrnic1)
	got1=$(devinfo_addr cfga)
	# A taken address:port fails the open; try other ones.
	if [ -z "$got1" ] || [ -z "$got2" ]; then
		echo "try $try: a device did not open: $(head -2 "$tmp/err")"
		continue
	fi
	done_ok=1
	break
done
if [ "$done_ok" = 1 ]; then
	[ "$got2" = "$a2:$p2" ] && ok "unnamed entry is softrnic1: udp_address $got2" ||
		fail "softrnic1: udp_address '$got2', want $a2:$p2"
	[ "$got1" = "$a1:$p1" ] && ok "named entry: udp_address $got1" ||
		fail "cfga: udp_address '$got1', want $a1:$p1"
else
	fail "no free address:port pair in 5 tries"
fi
exit $bad
