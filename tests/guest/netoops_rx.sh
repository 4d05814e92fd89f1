# SPDX-License-Identifier: GPL-2.0
# A crash inside the receive path of the target's own NIC: nto_rxcrash's
# packet handler, in eth0's NAPI poll, meets the datagram the host sends
# once the guest says "armed" (nto.rxmode=):
#   oops    it oopses there: "Fatal exception in interrupt"
#   lockup  it spins there until the soft-lockup watchdog panics
#   spin    it spins there with interrupts off on CPU 1 (the NIC's
#           interrupts go to CPU 1), and CPU 0 panics (sysrq c): the
#           panic stops CPU 1 inside the poll
#   irqspin a handler shared on eth0's interrupt line (e1000's INTx) spins
#           from the next interrupt on: CPU 1 is inside the NIC's
#           interrupt handler when CPU 0 panics
. /tests/lib.sh
. /tests/netoops_lib.sh
rxmode=$(arg rxmode oops)
# This shell stays on CPU 0; eth0's interrupts, and so its NAPI poll, go
# to CPU 1.
taskset -p 1 $$ >/dev/null || fail "taskset"
irqline=
if [ "$rxmode" = spin ] || [ "$rxmode" = irqspin ]; then
	nirq=0
	for irq in $(grep -E 'eth0|virtio0-(input|output)' /proc/interrupts |
		     cut -d: -f1); do
		echo 2 >"/proc/irq/$irq/smp_affinity" || fail "affinity of irq $irq"
		nirq=$((nirq + 1))
		irqline=$irq
	done
	[ $nirq -gt 0 ] || fail "no interrupt of eth0 in /proc/interrupts"
fi
netoops_load
netoops_setid
if [ "$rxmode" = irqspin ]; then
	[ $nirq = 1 ] || fail "eth0 has $nirq interrupts, wanted one shared line"
	kmod nto_rxcrash "mode=$rxmode" "irq=$(echo $irqline | tr -d " ")"
else
	kmod nto_rxcrash "mode=$rxmode"
fi
result armed
if [ "$rxmode" = spin ] || [ "$rxmode" = irqspin ]; then
	n=0
	while [ "$(cat /proc/nto_rxspin)" != 1 ]; do
		n=$((n + 1))
		[ $n -gt 600 ] && fail "the marked datagram never arrived"
		sleep 0.1
	done
	echo c >/proc/sysrq-trigger
fi
sleep 120
fail "no crash"
