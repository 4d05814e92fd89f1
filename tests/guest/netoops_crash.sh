# SPDX-License-Identifier: GPL-2.0
# Load netoops with one target on the host, set the boot id and the blob,
# then crash: nto.how=sysrq (panic) or nto.how=<nto_crash mode>.
. /tests/lib.sh
hostmac=$(arg hostmac ff:ff:ff:ff:ff:ff)
kmod netpoll_targets
kmod netoops "netoops=@$NTO_IP/eth0,2004@$NTO_HOST/$hostmac"
echo "$(arg bootid 0)" >/sys/kernel/netoops/netoops_boot_id ||
	fail "boot id not accepted"
printf '%s' "$(arg blob)" >/sys/kernel/netoops/netoops_user_blob ||
	fail "blob not accepted"
result ready
# nto.trigger=tcp: crash when the host connects to TCP port 7000, so that
# several guests can crash at the same moment.
if [ "$(arg trigger)" = tcp ]; then
	nc -l -p 7000 </dev/null >/dev/null
fi
how=$(arg how sysrq)
if [ "$how" = sysrq ]; then
	echo c >/proc/sysrq-trigger
else
	insmod /lib/modules/nto/nto_crash.ko "mode=$how"
fi
# A process-context oops kills insmod and the machine goes on.
result alive
# nto.soft=1: then take a soft dump (for a warning, which dumps nothing).
if [ "$(arg soft)" = 1 ]; then
	echo y >/proc/sysrq-trigger
fi
sleep 2
