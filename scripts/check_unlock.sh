#!/bin/bash
# scripts/check_unlock.sh - fail when code leaves the NIC lock without
# srn_nic_unlock().
#
# srn_nic_unlock() sends what the transport queued while the lock was held
# (the transmit queue and dirty same-host rings), then unlocks.  A raw
# pthread_mutex_unlock(&...nic->lock) skips that flush: packets queued in
# that lock hold wait for whoever takes the lock next.  Issue 11, step 4:
# one way out of the lock.
#
# Allowed without a mark: src/engine/ (the engine owns the lock and the
# queue: srn_nic_unlock itself, and lifecycle code that runs before the
# queue exists or after it is gone, engine/nic.c).  Anywhere else
# in src/, a raw unlock needs the mark
#
#     /* raw nic unlock: <why the flush is wrong or impossible here> */
#
# on the same line or on the line just above it.
#
# A text check: it finds `pthread_mutex_unlock(&<expr>nic->lock)`, not an
# unlock through a pointer copied from &nic->lock.
#
# Usage: scripts/check_unlock.sh [--list]
#   --list  also print the marked (allowed) sites
# Exit 0 when every raw unlock outside the engine is marked, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

list=0
[ "${1:-}" = --list ] && list=1

# Files to read: src/**/*.[ch] except the engine.
mapfile -t files < <(find src -name '*.[ch]' ! -path 'src/engine/*' |
		     LC_ALL=C sort)

# awk prints "BAD file:line: text" or "OK file:line: text" per raw unlock.
out=$(awk -v list="$list" '
	FNR == 1 { prev = "" }
	/pthread_mutex_unlock[ \t]*\([ \t]*&[^)]*nic->lock[ \t]*\)/ {
		text = $0
		sub(/^[ \t]+/, "", text)
		marked = ($0 ~ /raw nic unlock:/) || (prev ~ /raw nic unlock:/)
		if (!marked)
			print "BAD " FILENAME ":" FNR ": " text
		else if (list)
			print "OK  " FILENAME ":" FNR ": " text
	}
	{ prev = $0 }
' "${files[@]}")

[ -n "$out" ] && printf '%s\n' "$out"
bad=$(grep -c '^BAD ' <<<"$out" || true)
if [ "$bad" -gt 0 ]; then
	echo "check_unlock: $bad raw unlock(s) of nic->lock outside src/engine/:" \
	     "use srn_nic_unlock(), or mark why raw is right" \
	     "(/* raw nic unlock: ... */)"
	exit 1
fi
echo "check_unlock: every exit from nic->lock outside the engine is srn_nic_unlock()"
exit 0
