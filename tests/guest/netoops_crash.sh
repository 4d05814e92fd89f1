# SPDX-License-Identifier: GPL-2.0
# Load netoops with one target on the host, set the boot id and the blob,
# then crash, as nto.how= says:
#   sysrq      sysrq c (a plain panic), on CPU nto.cpu= if given
#   nmi        report "armed" and wait: the host injects an NMI
#   hang       a task blocked in D state (with hung_task_panic=1)
#   <mode>     insmod nto_crash.ko mode=<mode> (null, timer, oops2, oom, ...)
# nto.blobloop=1 first starts a writer that rewrites the blob in a tight
# loop on CPU 1.
. /tests/lib.sh
. /tests/netoops_lib.sh
netoops_load
netoops_setid
result mode "$(cat $sys/mode)"
result ready
# nto.trigger=tcp: crash when the host connects to TCP port 7000, so that
# several guests can crash at the same moment.
if [ "$(arg trigger)" = tcp ]; then
	nc -l -p 7000 </dev/null >/dev/null
fi
if [ "$(arg blobloop)" = 1 ]; then
	a=$(head -c 100 /dev/zero | tr '\0' A)
	b=$(head -c 60 /dev/zero | tr '\0' B)
	taskset 2 sh -c "while :; do printf $a >$sys/netoops_user_blob;
		printf $b >$sys/netoops_user_blob; done" &
	sleep 1
fi
how=$(arg how sysrq)
case $how in
sysrq)
	if [ -n "$(arg cpu)" ]; then
		taskset "$((1 << $(arg cpu)))" sh -c 'echo c >/proc/sysrq-trigger'
	else
		echo c >/proc/sysrq-trigger
	fi ;;
nmi)
	result armed
	sleep 120 ;;
hang)
	echo 2 >/proc/sys/kernel/hung_task_timeout_secs
	insmod /lib/modules/nto/nto_crash.ko mode=hang &
	sleep 120 ;;
*)
	insmod /lib/modules/nto/nto_crash.ko "mode=$how" ;;
esac
# A process-context oops kills insmod and the machine goes on.
result alive
result counters "$(counters)"
# nto.soft=1: then take a soft dump (for a warning, which dumps nothing).
if [ "$(arg soft)" = 1 ]; then
	echo y >/proc/sysrq-trigger
fi
sleep 2
