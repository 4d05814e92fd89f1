# SPDX-License-Identifier: GPL-2.0
# A soft dump asked for from hard-interrupt context on CPU 0 (interrupts
# stay off for the whole dump) while CPU 1 panics.  The soft dump must
# return at its next packet (panic_on_other_cpu(), core hook 0007), so that
# the panic stops CPU 0 with its interrupt, not with an NMI after a second.
. /tests/lib.sh
. /tests/netoops_lib.sh
# This shell stays on CPU 1: CPU 0 is busy with interrupts off.
taskset -p 2 $$ >/dev/null || fail "taskset"
netoops_load pace_us=1000
netoops_setid
taskset 1 insmod /lib/modules/nto/nto_crash.ko mode=irqsoft ||
	fail "insmod irqsoft"
# Shell builtins only from here: a new process needs CPU 0 (IPIs for the
# TLB), which answers none while it sends the soft dump.
n=0
while read -r sent <$sys/dumps_sent && [ "$sent" = 0 ]; do
	n=$((n + 1))
	[ $n -gt 100000 ] && fail "the soft dump never started"
done
# ... and 0.3 s into it (the whole dump takes over a second), panic.
now() {
	read -r up _ </proc/uptime
	frac=${up#*.}
	t=$((${up%.*} * 100 + ${frac#0}))
}
now
start=$t
while [ $t -lt $((start + 30)) ]; do
	now
done
echo c >/proc/sysrq-trigger
fail "the panic returned"
