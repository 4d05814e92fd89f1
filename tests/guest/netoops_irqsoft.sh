# SPDX-License-Identifier: GPL-2.0
# A soft dump asked for from hard-interrupt context on CPU 0 (interrupts
# stay off for the whole dump) while CPU 1 panics.  The soft dump must
# return at its next packet (panic_on_other_cpu(), core hook 0007), so that
# the panic stops CPU 0 with its interrupt, not with an NMI after a second.
# The soft dump is asked for with a break and "y" on the serial console,
# which the host sends once the guest says "armed": sysrq y in the UART's
# interrupt handler (MAGIC_SYSRQ_SERIAL).
. /tests/lib.sh
. /tests/netoops_lib.sh
# This shell stays on CPU 1: CPU 0 is busy with interrupts off.
taskset -p 2 $$ >/dev/null || fail "taskset"
netoops_load pace_us=1000
netoops_setid
now() {
	read -r up _ </proc/uptime
	frac=${up#*.}
	t=$((${up%.*} * 100 + ${frac#0}))
}
# the console's UART (ttyS0, IRQ 4) interrupts CPU 0
echo 1 >/proc/irq/4/smp_affinity || fail "IRQ 4 to CPU 0"
result armed
# Shell builtins only from here: a new process needs CPU 0 (IPIs for the
# TLB), which answers none while it sends the soft dump.
now
start=$t
while read -r sent <$sys/dumps_sent && [ "$sent" = 0 ]; do
	now
	[ $t -gt $((start + 3000)) ] && fail "the soft dump never started"
done
# ... and 0.3 s into it (the whole dump takes over a second), panic.
now
start=$t
while [ $t -lt $((start + 30)) ]; do
	now
done
echo c >/proc/sysrq-trigger
fail "the panic returned"
