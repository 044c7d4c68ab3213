#!/bin/bash
# softrnic installed, not run from the build tree (issue 13, item 5):
#   prefix  `cmake --install` into a temporary prefix, moved elsewhere
#           afterwards (nothing may depend on where it was installed): the
#           libraries sit in <prefix>/lib/softrnic only, the installed
#           `softrnic run` finds them next to itself, and Debian's
#           ibv_rc_pingpong (and ibv_devinfo) run through it
#   machine the whole-machine setup README.md documents for root, played in
#           a private mount namespace so the machine is untouched: an
#           /etc/ld.so.conf.d entry for <prefix>/lib/softrnic ahead of the
#           system's, ldconfig (into a cache bind-mounted over
#           /etc/ld.so.cache in the namespace only); then ibv_devinfo and
#           ibv_rc_pingpong run on softrnic without `softrnic run`
#   deb     `cpack -G DEB` into a temporary directory: the package holds
#           /usr/bin/softrnic and /usr/lib/softrnic/ (nothing that shadows
#           rdma-core), declares its dependencies, and its softrnic runs
#           ibv_devinfo once unpacked (dpkg-deb -x: the test never installs
#           into the machine)
set -u
MODE=${1:?mode: prefix|machine|deb}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
ok() { echo "ok    $*"; }
bad() { echo "FAIL  $*"; fail=1; }
ASAN_ENV=
[ -n "${SRN_ASAN_PRELOAD:-}" ] &&
    ASAN_ENV="env LD_PRELOAD=$SRN_ASAN_PRELOAD ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"

# layout ROOT: the libraries in ROOT/lib/softrnic, none where a loader looks.
layout() {
    local root=$1 f
    for f in bin/softrnic lib/softrnic/libibverbs.so.1 lib/softrnic/librdmacm.so.1 \
             lib/softrnic/libsoftrnic.so.0; do
        [ -e "$root/$f" ] && ok "installed $f" || bad "missing $f"
    done
    if find "$root" -name 'lib*.so*' ! -path "$root/lib/softrnic/*" | grep -q .; then
        bad "a library outside lib/softrnic: $(find "$root" -name 'lib*.so*' ! -path "$root/lib/softrnic/*")"
    fi
    # No development symlink: nothing links against our libibverbs by name.
    [ -e "$root/lib/softrnic/libibverbs.so" ] && bad "installed the libibverbs.so dev link"
}

# devinfo SOFTRNIC: ibv_devinfo through that softrnic sees softrnic0, and
# loads its libibverbs.so.1 from beside that softrnic.
devinfo() {
    local sr=$1 libdir
    libdir=$(cd "$(dirname "$sr")/../lib/softrnic" && pwd)
    if timeout 60 $ASAN_ENV "$sr" run -- ibv_devinfo 2>&1 | grep -q "hca_id:.*softrnic0"; then
        ok "$sr run -- ibv_devinfo: softrnic0"
    else
        bad "$sr run -- ibv_devinfo shows no softrnic0"
        timeout 60 "$sr" run -- ibv_devinfo 2>&1 | head -5
    fi
    if timeout 60 "$sr" run -- sh -c 'ldd "$(command -v ibv_devinfo)"' |
       grep -q "libibverbs.so.1 => $libdir/libibverbs.so.1"; then
        ok "ibv_devinfo loads $libdir/libibverbs.so.1"
    else
        bad "ibv_devinfo does not load $libdir/libibverbs.so.1"
    fi
}

case $MODE in
prefix)
    command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }
    timeout 300 cmake --install "$SRN_BUILD" --prefix "$TMP/first" >"$TMP/log" 2>&1 ||
        { cat "$TMP/log"; echo "FAIL  cmake --install"; exit 1; }
    mv "$TMP/first" "$TMP/moved"
    P=$TMP/moved
    layout "$P"
    devinfo "$P/bin/softrnic"
    # The system's loader does not see them: installing changes nothing
    # for a program started without `softrnic run`.
    if ldconfig -p 2>/dev/null | grep -q "$P"; then bad "ld.so.cache knows $P"; fi
    source "$SRN_SRC/tests/lib/pingpong.sh"
    if SOFTRNIC="$P/bin/softrnic" srn_pingpong ibv_rc_pingpong "" "" 127.0.0.1 -g 0 -n 200 -s 4096; then
        ok "ibv_rc_pingpong through the installed softrnic run"
    else
        bad "ibv_rc_pingpong through the installed softrnic run"
    fi
    ;;
machine)
    [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && command -v ldconfig >/dev/null ||
        { echo "SKIP: needs root, unshare and ldconfig"; exit 77; }
    command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }
    unshare -m true 2>/dev/null || { echo "SKIP: cannot make a mount namespace here"; exit 77; }
    timeout 300 cmake --install "$SRN_BUILD" --prefix "$TMP/p" >"$TMP/log" 2>&1 ||
        { cat "$TMP/log"; echo "FAIL  cmake --install"; exit 1; }
    # What root would write: /etc/ld.so.conf.d/00-softrnic.conf, sorted
    # before the system's own entries, then ldconfig.
    mkdir "$TMP/conf.d"
    cp /etc/ld.so.conf.d/*.conf "$TMP/conf.d/" 2>/dev/null
    echo "$TMP/p/lib/softrnic" >"$TMP/conf.d/00-softrnic.conf"
    echo "include $TMP/conf.d/*.conf" >"$TMP/ld.so.conf"
    ldconfig -f "$TMP/ld.so.conf" -C "$TMP/ld.so.cache" ||
        { echo "FAIL  ldconfig"; exit 1; }
    # No `softrnic run`: the pingpong helper gets a stand-in that only
    # drops "run --".
    printf '#!/bin/sh\n[ "$1" = run ] && shift\n[ "$1" = -- ] && shift\nexec "$@"\n' >"$TMP/norun"
    chmod +x "$TMP/norun"
    cat >"$TMP/inner.sh" <<EOF_INNER
set -u
mount --make-rprivate / && mount --bind "$TMP/ld.so.cache" /etc/ld.so.cache || exit 3
fail=0
if $ASAN_ENV ibv_devinfo 2>&1 | grep -q "hca_id:.*softrnic0"; then
    echo "ok    ibv_devinfo (no softrnic run) sees softrnic0"
else
    echo "FAIL  ibv_devinfo without softrnic run:"; ibv_devinfo 2>&1 | head -3; fail=1
fi
source "$SRN_SRC/tests/lib/pingpong.sh"
if SOFTRNIC="$TMP/norun" srn_pingpong ibv_rc_pingpong "" "" 127.0.0.1 -g 0 -n 200 -s 4096; then
    echo "ok    ibv_rc_pingpong (no softrnic run) on softrnic"
else
    echo "FAIL  ibv_rc_pingpong without softrnic run"; fail=1
fi
exit \$fail
EOF_INNER
    timeout 300 unshare -m bash "$TMP/inner.sh" || fail=1
    # The machine's own cache never named our libraries.
    if ldconfig -p | grep -q "$TMP"; then bad "the machine's ld.so.cache changed"; fi
    ;;
deb)
    command -v cpack >/dev/null && command -v dpkg-deb >/dev/null ||
        { echo "SKIP: cpack or dpkg-deb missing"; exit 77; }
    [ -f "$SRN_BUILD/CPackConfig.cmake" ] || { echo "FAIL  no CPackConfig.cmake"; exit 1; }
    (cd "$TMP" && timeout 300 cpack -G DEB -B "$TMP/pkg" --config "$SRN_BUILD/CPackConfig.cmake") \
        >"$TMP/log" 2>&1 || { tail -20 "$TMP/log"; echo "FAIL  cpack -G DEB"; exit 1; }
    deb=$(ls "$TMP"/pkg/softrnic_*.deb 2>/dev/null | head -1)
    [ -n "$deb" ] || { tail -20 "$TMP/log"; echo "FAIL  cpack made no .deb"; exit 1; }
    ok "built $(basename "$deb")"
    dpkg-deb -f "$deb" Depends | grep -q "libisal" &&
        ok "Depends: $(dpkg-deb -f "$deb" Depends)" || bad "Depends lacks libisal"
    if dpkg-deb -c "$deb" | awk '{print $6}' | grep -v -E '^\./usr/(bin/softrnic|lib/softrnic/.*|share/doc/softrnic/.*|bin/|lib/|share/|share/doc/|)$' | grep -q .; then
        bad "unexpected files in the package: $(dpkg-deb -c "$deb" | awk '{print $6}' |
             grep -v -E '^\./usr/(bin/softrnic|lib/softrnic/.*|share/doc/softrnic/.*|bin/|lib/|share/|share/doc/|)$')"
    else
        ok "package holds only /usr/bin/softrnic, /usr/lib/softrnic/, its docs"
    fi
    dpkg-deb -x "$deb" "$TMP/root"
    layout "$TMP/root/usr"
    devinfo "$TMP/root/usr/bin/softrnic"
    ;;
esac
exit $fail
