# SPDX-License-Identifier: GPL-2.0
# An NMI lands while CPU 0 sends a soft dump to two targets, one through
# each NIC (eth0 and eth1, nto.ip2=): the host injects it once the guest
# says the soft dump is in flight.  CPU 0 may be inside one NIC's transmit
# routine when it lands, and that NIC's transmit lock is then held for
# good: the panic dump must still get out whole through the other.
. /tests/lib.sh
. /tests/netoops_lib.sh
# This shell stays on CPU 1; CPU 0 sends the soft dump.
taskset -p 2 $$ >/dev/null || fail "taskset"
ip link set eth1 up || fail "eth1 up"
n=0
while [ "$(cat /sys/class/net/eth1/carrier 2>/dev/null)" != 1 ]; do
	n=$((n + 1))
	[ $n -gt 50 ] && fail "eth1 has no carrier"
	sleep 0.1
done
hostmac=$(arg hostmac)
kmod netpoll_targets
kmod netoops pace_us=1000 \
	"netoops=@$NTO_IP/eth0,2004@$NTO_HOST/$hostmac;@$(arg ip2)/eth1,2004@$NTO_HOST/$hostmac"
netoops_setid
pad_log "$(arg pad)"
# the whole soft dump (three copies of some 270 chunks to two targets)
# takes seconds
soft_dump_on_cpu0
result armed
sleep 120
