# SPDX-License-Identifier: GPL-2.0
# A fault inside the dump: the transmit routine of ntofault0 faults during
# a soft dump.  netoops skips that target from then on, and a later panic
# still gets its dump out through the working target on eth0.
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
echo 1 >/sys/module/nto_faultdev/parameters/fault
# The soft dump oopses the shell that asked for it.
sh -c 'echo y >/proc/sysrq-trigger'
result alive
result counters "$(counters)"
echo c >/proc/sysrq-trigger
fail "the panic returned"
