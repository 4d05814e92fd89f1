# SPDX-License-Identifier: GPL-2.0
# A panic on a busy machine: once the guest says "armed", the host floods
# eth0 with UDP and takes TCP streams from both CPUs (nc to its discard
# port 9); once the flood is seen, CPU 0 panics (nto.how=sysrq) or the host
# injects an NMI (nto.how=nmi, after the guest says "flooded").
. /tests/lib.sh
. /tests/netoops_lib.sh
taskset -p 1 $$ >/dev/null || fail "taskset"
netoops_load
netoops_setid
result queues "$(ls -d /sys/class/net/eth0/queues/tx-* | wc -l)"
stats=/sys/class/net/eth0/statistics
result armed
for cpu in 1 2; do
	taskset $cpu sh -c "while :; do nc $NTO_HOST 9 </dev/zero >/dev/null 2>&1;
		sleep 0.2; done" &
done
rx0=$(cat $stats/rx_packets)
tx0=$(cat $stats/tx_packets)
i=0
while [ $(($(cat $stats/rx_packets) - rx0)) -lt 2000 ] ||
      [ $(($(cat $stats/tx_packets) - tx0)) -lt 2000 ]; do
	i=$((i + 1))
	[ $i -gt 600 ] && fail "no traffic: rx $(($(cat $stats/rx_packets) - rx0)) tx $(($(cat $stats/tx_packets) - tx0))"
	sleep 0.1
done
result flooded
case $(arg how sysrq) in
sysrq) echo c >/proc/sysrq-trigger ;;
nmi) sleep 120 ;;
esac
fail "no crash"
