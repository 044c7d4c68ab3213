#!/bin/bash
# Same-host inbox names belong to whoever creates them first in /dev/shm
# (issue 10, item 1).  Debian's unmodified ibv_rc_pingpong, server on
# $A and client on $B (SOFTRNIC_DEVICES, one UDP port), run as root:
#
#   a. uid 65534 plants the inbox name of $A before the server starts
#      (test_trust_shm_plant: a real inbox of its own, 0600).  Both ends
#      exit 0, the server's device log says the name is taken, the pair
#      still talks through rings (another name), and the planted inbox
#      gets no packet and its file is unchanged.
#   b. a server without an inbox (SOFTRNIC_SHM=0), and under its name a
#      planted inbox that is our own user's but mode 0644, or another
#      user's: the client never writes into it (UDP), both exit 0.
#   c. the files behind the server's inbox are shrunk to 0 bytes (as the
#      same user could) before the client starts, the client's as soon
#      as it has one: no SIGBUS, both exit 0; the mapped ones refuse to
#      shrink and the rings carry the run.
set -u
source "$SRN_SRC/tests/lib/pingpong.sh"
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (plays uid 65534)"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: no setpriv"; exit 77; }
PLANT="$SRN_BUILD/bin/test_trust_shm_plant"
ATTACKER=(setpriv --reuid=65534 --regid=65534 --clear-groups)

tmp=$(mktemp -d)
plant_pid=""
trap '[ -n "$plant_pid" ] && kill "$plant_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fail=0 nbad=0
bad() { echo "FAIL: $*"; fail=1; nbad=$((nbad + 1)); }

net=$(printf %x "$(stat -L -c %i /proc/self/ns/net)")
sub=$((RANDOM % 250 + 1))
A=127.78.$sub.1 B=127.78.$sub.2
port=$((20000 + RANDOM % 12000))
name_a=/dev/shm/softrnic-link-$net-$A-$port
export SRN_PP_TIMEOUT=20

counter() {
    awk -v n="$2" '$1 == "softrnic" && $3 == n { v = $4 } END { print v + 0 }' "$1"
}

# pp NAME "SERVER ENV" "CLIENT ENV" ARGS...: the ping-pong, logs kept.
pp() {
    local name=$1 senv=$2 cenv=$3
    shift 3
    local tcp=$((20000 + RANDOM % 12000))
    # shellcheck disable=SC2046,SC2086
    env SOFTRNIC_STATS=1 SOFTRNIC_LOG=warn SOFTRNIC_DEVICES="name=softrnic0,addr=$A,port=$port" \
        $senv $(srn_pp_env) timeout -k 5 "$SRN_PP_TIMEOUT" \
        "$SOFTRNIC" run -- ibv_rc_pingpong -p "$tcp" -g 0 "$@" >"$tmp/$name.srv" 2>&1 &
    local spid=$!
    srn_pp_wait_listen "" "$tcp" || { bad "$name: server never listened"; return 1; }
    # shellcheck disable=SC2046,SC2086
    env SOFTRNIC_STATS=1 SOFTRNIC_LOG=warn SOFTRNIC_DEVICES="name=softrnic0,addr=$B,port=$port" \
        $cenv $(srn_pp_env) timeout -k 5 "$SRN_PP_TIMEOUT" \
        "$SOFTRNIC" run -- ibv_rc_pingpong -p "$tcp" -g 0 "$@" 127.0.0.1 >"$tmp/$name.cli" 2>&1
    local crc=$?
    wait "$spid"
    local src=$?
    if [ "$crc" -ne 0 ] || [ "$src" -ne 0 ]; then
        bad "$name: ibv_rc_pingpong $* (server rc=$src, client rc=$crc)"
        tail -n 5 "$tmp/$name.srv" "$tmp/$name.cli"
        return 1
    fi
    return 0
}

# plant WHO MODE: an inbox under $A's name, by WHO (attacker|self).
plant() {
    local who=$1 mode=$2 i
    : >"$tmp/plant.out"
    if [ "$who" = attacker ]; then
        "${ATTACKER[@]}" env SOFTRNIC_SHM_RING_KB=128 "$PLANT" "$A" "$port" "$mode" 60 \
            >"$tmp/plant.out" 2>&1 &
    else
        env SOFTRNIC_SHM_RING_KB=128 "$PLANT" "$A" "$port" "$mode" 60 >"$tmp/plant.out" 2>&1 &
    fi
    plant_pid=$!
    for ((i = 0; i < 100; i++)); do
        grep -q '^planted /' "$tmp/plant.out" && break
        sleep 0.05
    done
    grep -q "^planted $name_a\$" "$tmp/plant.out" || { bad "could not plant: $(cat "$tmp/plant.out")"; return 1; }
    sha256sum "$name_a" >"$tmp/plant.sum"
}

# unplant CASE: stop the planter; its inbox must have received nothing and
# its file must be as it was.
unplant() {
    sha256sum --status -c "$tmp/plant.sum" || bad "$1: the planted file $name_a changed"
    kill -TERM "$plant_pid"
    wait "$plant_pid"
    plant_pid=""
    local got
    got=$(sed -n 's/^planted inbox received \([0-9]*\) packets.*/\1/p' "$tmp/plant.out")
    [ "$got" = 0 ] || bad "$1: $(grep received "$tmp/plant.out" || echo "planter said nothing")"
}

# a. The name taken by another user before the server starts.
before=$nbad
if plant attacker 0600; then
    if pp squat "" "" -n 1000 -s 4096; then
        shm_s=$(counter "$tmp/squat.srv" shm_sent_pkts)
        shm_c=$(counter "$tmp/squat.cli" shm_sent_pkts)
        if ! grep -q "inbox name softrnic-link-$net-$A-$port is taken by uid 65534" "$tmp/squat.srv"; then
            bad "a: the server's log does not say its inbox name was taken"
            grep softrnic: "$tmp/squat.srv"
        elif [ "$shm_s" -lt 1000 ] || [ "$shm_c" -lt 1000 ]; then
            bad "a: rings not used (server sent $shm_s, client $shm_c packets through them)"
        else
            echo "ok: a. name squatted by uid 65534: $(grep -o 'using softrnic-link[^ ]*' "$tmp/squat.srv"), $shm_c + $shm_s packets through rings"
        fi
    fi
    unplant a
    [ $nbad -eq $before ] && echo "ok: a. the squatter's inbox got nothing, its file unchanged"
fi

# b. A planted inbox of the wrong mode or owner, no rightful one.
for who_mode in "self 0644" "attacker 0600" "attacker 0666"; do
    # shellcheck disable=SC2086
    set -- $who_mode
    before=$nbad
    plant "$1" "$2" || continue
    if pp "plant_$1_$2" "SOFTRNIC_SHM=0" "" -n 300 -s 1024; then
        shm=$(counter "$tmp/plant_$1_$2.cli" shm_sent_pkts)
        [ "$shm" -eq 0 ] || bad "b: the client sent $shm packets into a ring ($1, mode $2)"
    fi
    unplant "b ($1 $2)"
    [ $nbad -eq $before ] && echo "ok: b. planted inbox ($1, mode $2) never written; UDP instead"
done

# c. Shrink the inboxes under their live owners: the server's before the
#    client starts (so all the traffic comes after), the client's as soon
#    as it has an inbox.  c1 shrinks every file, in /dev/shm and behind
#    it (a layout-1 inbox was the /dev/shm file: SIGBUS); c2 only the
#    mapped ones, which must refuse, the rings carrying the whole run.
# shrink WHAT TIMEOUT_PID ADDR: WHAT is all (the names in /dev/shm too) or
# mapped (memfds of the process, the child of `timeout`, only).
shrink() {
    local what=$1 t=$2 addr=$3 f p fd
    if [ "$what" = all ]; then
        for f in /dev/shm/softrnic-link-"$net"-"$addr"-"$port"*; do
            [ -e "$f" ] && truncate -s 0 "$f" && shrunk=$((shrunk + 1))
        done
    fi
    # shellcheck disable=SC2013
    for p in $(cat /proc/"$t"/task/*/children 2>/dev/null); do
        for fd in /proc/"$p"/fd/*; do
            case $(readlink "$fd" 2>/dev/null) in
            /memfd:softrnic-link*)
                if truncate -s 0 "$fd" 2>/dev/null; then
                    shrunk=$((shrunk + 1))
                else
                    refused=$((refused + 1))
                fi ;;
            esac
        done
    done
}
# wait_inbox ADDR: until a file under ADDR's inbox names exists (5 s).
wait_inbox() {
    local i
    for ((i = 0; i < 500; i++)); do
        compgen -G "/dev/shm/softrnic-link-$net-$1-$port*" >/dev/null && return 0
        sleep 0.01
    done
    return 1
}
host=3
for what in all mapped; do
    # Addresses of their own: a shrunk locator stays until its name is used again.
    CA=127.78.$sub.$host CB=127.78.$sub.$((host + 1))
    host=$((host + 2))
    shrunk=0 refused=0
    tcp=$((20000 + RANDOM % 12000))
    # shellcheck disable=SC2046
    env SOFTRNIC_STATS=1 SOFTRNIC_DEVICES="name=softrnic0,addr=$CA,port=$port" $(srn_pp_env) \
        timeout -k 5 120 "$SOFTRNIC" run -- ibv_rc_pingpong -p "$tcp" -g 0 -n 20000 -s 64 \
        >"$tmp/shrink.srv" 2>&1 &
    spid=$!
    srn_pp_wait_listen "" "$tcp" || bad "c: server never listened"
    wait_inbox "$CA" || bad "c: the server has no inbox"
    shrink $what "$spid" "$CA"
    sleep 0.2
    # shellcheck disable=SC2046
    env SOFTRNIC_STATS=1 SOFTRNIC_DEVICES="name=softrnic0,addr=$CB,port=$port" $(srn_pp_env) \
        timeout -k 5 120 "$SOFTRNIC" run -- ibv_rc_pingpong -p "$tcp" -g 0 -n 20000 -s 64 127.0.0.1 \
        >"$tmp/shrink.cli" 2>&1 &
    cpid=$!
    wait_inbox "$CB" && shrink $what "$cpid" "$CB"
    wait "$cpid"; crc=$?
    wait "$spid"; src=$?
    # The shrunk locators stay (not even a header to tell whose they were).
    rm -f /dev/shm/softrnic-link-"$net"-127.78."$sub".*-"$port"*
    shm_s=$(counter "$tmp/shrink.srv" shm_sent_pkts)
    shm_c=$(counter "$tmp/shrink.cli" shm_sent_pkts)
    if [ "$crc" -ne 0 ] || [ "$src" -ne 0 ]; then
        bad "c ($what): after the shrink: server rc=$src, client rc=$crc (SIGBUS is 135)"
        tail -n 3 "$tmp/shrink.srv" "$tmp/shrink.cli"
    elif [ $what = mapped ] && { [ "$shm_s" -lt 20000 ] || [ "$shm_c" -lt 20000 ] || [ $shrunk -ne 0 ] || [ $refused -lt 2 ]; }; then
        bad "c ($what): $shrunk shrunk, $refused refused, rings carried $shm_s (server) and $shm_c (client) packets"
    else
        echo "ok: c. shrank $shrunk files ($what), $refused refused (sealed): both ends exit 0, $shm_c + $shm_s packets through rings"
    fi
done
exit $fail
