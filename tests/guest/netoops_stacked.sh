# SPDX-License-Identifier: GPL-2.0
# The netoops target on a device stacked on eth0 (nto.stack=):
#   bridge   br0 with eth0 as its port, the guest's address on br0
#   vlan     eth0.5 (VLAN 5), at 198.51.100.<n>; the host reads the tagged
#            frames off its bridge with a packet socket
#   macvlan  mv0 (bridge mode) on eth0, the guest's address on mv0
# then crashes as nto.how= says: sysrq (c, on CPU 0) or nmi (the host
# injects one once the guest says "armed").  With nto.soft=1, CPU 1 sends
# a soft dump through the same target first, so that the NIC's ring and
# the pool are busy when the panic comes.
. /tests/lib.sh
. /tests/netoops_lib.sh
taskset -p 1 $$ >/dev/null || fail "taskset"
hostmac=$(arg hostmac)
n=${NTO_IP##*.}
ip addr flush dev eth0
case $(arg stack) in
bridge)
	ip link add br0 type bridge forward_delay 0 || fail "br0"
	ip link set br0 address "$(cat /sys/class/net/eth0/address)"
	ip link set eth0 master br0 || fail "eth0 into br0"
	ip addr add "$NTO_IP/24" dev br0
	ip link set br0 up
	dev=br0 ip=$NTO_IP ;;
vlan)
	ip link add link eth0 name eth0.5 type vlan id 5 || fail "eth0.5"
	ip addr add "198.51.100.$n/24" dev eth0.5
	ip link set eth0.5 up
	dev=eth0.5 ip=198.51.100.$n ;;
macvlan)
	ip link add link eth0 name mv0 type macvlan mode bridge || fail "mv0"
	ip addr add "$NTO_IP/24" dev mv0
	ip link set mv0 up
	dev=mv0 ip=$NTO_IP ;;
*)
	fail "unknown nto.stack=$(arg stack)" ;;
esac
i=0
while [ "$(cat /sys/class/net/$dev/carrier 2>/dev/null)" != 1 ]; do
	i=$((i + 1))
	[ $i -gt 300 ] && fail "$dev has no carrier"
	sleep 0.1
done
kmod netpoll_targets
kmod netoops "netoops=@$ip/$dev,2004@$NTO_HOST/$hostmac"
netoops_setid
pad_log "$(arg pad)"
result target "$dev"
if [ "$(arg soft)" = 1 ]; then
	taskset 2 sh -c 'echo y >/proc/sysrq-trigger' &
	i=0
	while [ "$(cat $sys/dumps_sent)" = 0 ]; do
		i=$((i + 1))
		[ $i -gt 100000 ] && fail "the soft dump never started"
	done
fi
case $(arg how sysrq) in
sysrq)
	echo c >/proc/sysrq-trigger ;;
nmi)
	result armed
	sleep 120 ;;
esac
fail "no crash"
