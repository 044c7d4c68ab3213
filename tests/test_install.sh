#!/bin/bash
# softrnic installed, not run from the build tree (issue 13, item 5):
#   prefix  `cmake --install` into a temporary prefix, moved elsewhere
#           afterwards (nothing may depend on where it was installed): the
#           libraries sit in <prefix>/lib/softrnic only, the installed
#           `softrnic run` finds them next to itself, and Debian's
#           ibv_rc_pingpong (and ibv_devinfo) run through it
#   deb     `cpack -G DEB` into a temporary directory: the package holds
#           /usr/bin/softrnic and /usr/lib/softrnic/ (nothing that shadows
#           rdma-core), declares its dependencies, and its softrnic runs
#           ibv_devinfo once unpacked (dpkg-deb -x: the test never installs
#           into the machine)
set -u
MODE=${1:?mode: prefix|deb}
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
