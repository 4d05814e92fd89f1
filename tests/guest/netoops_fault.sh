# SPDX-License-Identifier: GPL-2.0
# A fault inside the dump: the transmit routine of ntofault0 (a target
# added through configfs, so the first in the list, before the healthy
# target on eth0) faults when netpoll calls it.  nto.when= says which dump
# meets the fault first:
#   soft   a soft dump: netoops skips that target from then on, and a later
#          panic still gets its dump out through eth0
#   panic  the panic dump of sysrq c (panic_on_oops=0, process context):
#          netoops panics again and the dump starts over without ntofault0
#   oops   the panic dump of an oops with oops=panic on the command line
#   stuck  no fault: ntofault0 refuses every packet of the panic dump, so
#          netpoll parks them on its queue; netoops must leave that device
#          alone rather than pin its skbs there
#   hold   no fault: ntofault0 keeps every packet of the panic dump (as a
#          veth does); it must pin no more than its share of the pool
#   locked no fault: a thread on CPU 1 holds ntofault0's transmit lock
#          when CPU 0 panics, and the panic stops it there
. /tests/lib.sh
. /tests/netoops_lib.sh
kmod nto_faultdev
echo 1 >/proc/sys/net/ipv6/conf/ntofault0/disable_ipv6
ip link set ntofault0 up || fail "ntofault0 up"
netoops_load
netoops_setid
cfg=/sys/kernel/config/netoops
mkdir $cfg/faulty || fail "mkdir target"
echo ntofault0 >$cfg/faulty/dev_name
echo 198.51.100.1 >$cfg/faulty/local_ip
echo 198.51.100.2 >$cfg/faulty/remote_ip
echo 1 >$cfg/faulty/enabled || fail "enable the faulty target"
case $(arg when soft) in
stuck) echo 1 >/sys/module/nto_faultdev/parameters/busy ;;
locked)
	taskset -p 1 $$ >/dev/null || fail "taskset"
	echo 1 >/sys/module/nto_faultdev/parameters/lock
	i=0
	while [ "$(cat /sys/module/nto_faultdev/parameters/locked)" != Y ]; do
		i=$((i + 1))
		[ $i -gt 100 ] && fail "CPU 1 never took the lock"
		sleep 0.1
	done ;;
hold) echo 1 >/sys/module/nto_faultdev/parameters/hold ;;
*) echo 1 >/sys/module/nto_faultdev/parameters/fault ;;
esac
case $(arg when soft) in
soft)
	# The soft dump oopses the shell that asked for it.
	sh -c 'echo y >/proc/sysrq-trigger'
	result alive
	result counters "$(counters)"
	echo c >/proc/sysrq-trigger ;;
panic|stuck|hold|locked)
	echo c >/proc/sysrq-trigger ;;
oops)
	insmod /lib/modules/nto/nto_crash.ko mode=null ;;
esac
fail "the panic returned"
