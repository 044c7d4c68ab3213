#!/bin/bash
# test_abi_symbols.sh - softrnic's libibverbs.so.1 exports everything
# Debian's rdma-core 44 libibverbs.so.1 exports, with the same versions.
#
#  1. Every defined symbol@version of Debian's library (objdump -T: the
#     default versions, the compat ones objdump shows in parentheses such as
#     "(IBVERBS_1.0) ibv_alloc_pd", and the version nodes themselves) is
#     defined in ours in the same form.  Ours may export more.
#  2. Ours exports nothing unversioned and no internal srn_* name;
#     libsoftrnic.so.0 exports exactly the same set.
#  3. The versions really bind (dlvsym): each of the 33 IBVERBS_1.0 names
#     resolves to a function distinct from its IBVERBS_1.1 default, plain
#     dlsym finds the default, and calling the old ones fails with
#     EOPNOTSUPP without crashing.
#
# Exit 0 pass, 1 fail, 77 skip (no Debian libibverbs or no objdump/gcc).
set -u

build=${SRN_BUILD:?SRN_BUILD not set}
ours=$build/lib/libibverbs.so.1
soft=$build/lib/libsoftrnic.so.0

debian=
for d in /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/lib64 /usr/lib; do
	if [ -e "$d/libibverbs.so.1" ]; then
		debian=$d/libibverbs.so.1
		break
	fi
done
if [ -z "$debian" ] || ! command -v objdump >/dev/null; then
	echo "SKIP: no system libibverbs.so.1 or no objdump"
	exit 77
fi
if [ ! -e "$ours" ]; then
	echo "FAIL: $ours was not built"
	exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# "VERSION NAME" per defined dynamic symbol; a non-default version keeps
# objdump's parentheses, so "(IBVERBS_1.0) x" and "IBVERBS_1.1 x" differ.
defined_syms() {
	objdump -T "$1" | awk '
		/^[0-9a-f]+ / && !/\*UND\*/ && NF >= 2 { print $(NF-1), $NF }
	' | sort -u
}

defined_syms "$debian" | grep -E '^\(?IBVERBS' >"$work/debian"
defined_syms "$ours" >"$work/ours"

fail=0
ndeb=$(wc -l <"$work/debian")
if [ "$ndeb" -lt 100 ]; then
	echo "FAIL: only $ndeb IBVERBS symbols parsed from $debian"
	fail=1
fi

comm -23 "$work/debian" "$work/ours" >"$work/missing"
if [ -s "$work/missing" ]; then
	echo "FAIL: $(wc -l <"$work/missing") of $ndeb symbol@version missing from $ours:"
	sed 's/^/  /' "$work/missing"
	fail=1
else
	echo "ok: all $ndeb symbol@version of $debian present"
fi

comm -13 "$work/debian" "$work/ours" >"$work/extra"
if [ -s "$work/extra" ]; then
	echo "note: $(wc -l <"$work/extra") exported beyond Debian's set:"
	sed 's/^/  /' "$work/extra"
fi

# Anything outside a version node escaped the map's "local: *".
if grep -vE '^\(?[A-Z][A-Z0-9_.]*\)? ' "$work/ours" | grep . ||
   grep -E '^(Base|\(Base\)) ' "$work/ours" | grep . ||
   grep -E ' srn_' "$work/ours" | grep .; then
	echo "FAIL: unversioned or internal symbols exported (above)"
	fail=1
fi

if [ -e "$soft" ]; then
	defined_syms "$soft" >"$work/soft"
	if ! diff -u "$work/ours" "$work/soft" >"$work/soft.diff"; then
		echo "FAIL: libsoftrnic.so.0 and libibverbs.so.1 export different sets:"
		cat "$work/soft.diff"
		fail=1
	fi
fi

# An instrumented build needs its sanitizer runtime loaded first in a
# program that was not built with it.
preload=$(ldd "$ours" 2>/dev/null | awk '/lib(asan|tsan)\.so/ { print $3 }' | paste -sd: -)

if ! command -v gcc >/dev/null; then
	echo "note: no gcc, dlvsym check skipped"
	exit $fail
fi

cat >"$work/dlv.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>

static const char *const compat10[] = {
	"ibv_ack_async_event", "ibv_ack_cq_events", "ibv_alloc_pd",
	"ibv_attach_mcast", "ibv_close_device", "ibv_create_ah",
	"ibv_create_cq", "ibv_create_qp", "ibv_create_srq", "ibv_dealloc_pd",
	"ibv_dereg_mr", "ibv_destroy_ah", "ibv_destroy_cq", "ibv_destroy_qp",
	"ibv_destroy_srq", "ibv_detach_mcast", "ibv_free_device_list",
	"ibv_get_async_event", "ibv_get_cq_event", "ibv_get_device_guid",
	"ibv_get_device_list", "ibv_get_device_name", "ibv_modify_qp",
	"ibv_modify_srq", "ibv_open_device", "ibv_query_device",
	"ibv_query_gid", "ibv_query_pkey", "ibv_query_port", "ibv_query_qp",
	"ibv_query_srq", "ibv_reg_mr", "ibv_resize_cq",
};

int main(int argc, char **argv)
{
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	int bad = 0;

	if (!h) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 1;
	}
	for (unsigned i = 0; i < sizeof(compat10) / sizeof(compat10[0]); i++) {
		const char *n = compat10[i];
		void *old = dlvsym(h, n, "IBVERBS_1.0");
		void *cur = dlvsym(h, n, "IBVERBS_1.1");
		void *def = dlsym(h, n);

		if (!old || !cur || old == cur || def != cur) {
			fprintf(stderr, "%s: @1.0 %p, @1.1 %p, default %p\n",
				n, old, cur, def);
			bad++;
		}
	}

	void *(*list10)(int *) = (void *(*)(int *))dlvsym(h,
		"ibv_get_device_list", "IBVERBS_1.0");
	void *(*pd10)(void *) = (void *(*)(void *))dlvsym(h, "ibv_alloc_pd",
							   "IBVERBS_1.0");
	int (*dealloc10)(void *) = (int (*)(void *))dlvsym(h,
		"ibv_dealloc_pd", "IBVERBS_1.0");
	void (*reg11)(const char *, void *) =
		(void (*)(const char *, void *))dlvsym(h, "ibv_register_driver",
						       "IBVERBS_1.1");
	void (*reg34)(const void *) = (void (*)(const void *))dlvsym(h,
		"verbs_register_driver_34", "IBVERBS_PRIVATE_34");
	bool *allow = dlvsym(h, "verbs_allow_disassociate_destroy",
			     "IBVERBS_PRIVATE_34");
	int n = 7;

	if (!list10 || !pd10 || !dealloc10 || !reg11 || !reg34 || !allow) {
		fprintf(stderr, "versioned lookup failed\n");
		return 1;
	}
	errno = 0;
	if (list10(&n) != NULL || n != 0 || errno != EOPNOTSUPP) {
		fprintf(stderr, "ibv_get_device_list@1.0: n=%d errno=%d\n", n, errno);
		bad++;
	}
	errno = 0;
	if (pd10(NULL) != NULL || errno != EOPNOTSUPP) {
		fprintf(stderr, "ibv_alloc_pd@1.0 did not fail with EOPNOTSUPP\n");
		bad++;
	}
	if (dealloc10(NULL) != EOPNOTSUPP) {
		fprintf(stderr, "ibv_dealloc_pd@1.0 did not return EOPNOTSUPP\n");
		bad++;
	}
	reg11("legacy", NULL);
	reg34(NULL);
	if (*allow) {
		fprintf(stderr, "verbs_allow_disassociate_destroy set\n");
		bad++;
	}
	if (dlsym(h, "srn_compat10_ibv_alloc_pd")) {
		fprintf(stderr, "internal compat name visible\n");
		bad++;
	}
	return bad ? 1 : 0;
}
EOF
if ! gcc -std=gnu11 -Wall -Werror -o "$work/dlv" "$work/dlv.c" -ldl; then
	echo "FAIL: could not build the dlvsym checker"
	exit 1
fi
if LD_PRELOAD=$preload ASAN_OPTIONS=detect_leaks=0 LD_BIND_NOW=1 \
   timeout 30 "$work/dlv" "$ours"; then
	echo "ok: compat and private versions bind and fail cleanly"
else
	echo "FAIL: dlvsym checks (rc $?)"
	fail=1
fi

exit $fail
