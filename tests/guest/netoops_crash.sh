# SPDX-License-Identifier: GPL-2.0
# Load netoops with one target on the host, set the boot id and the blob,
# then crash, as nto.how= says:
#   sysrq      sysrq c (a plain panic), on CPU nto.cpu= if given
#   nmi        report "armed" and wait: the host injects an NMI (with
#              nto.live=1, once a soft dump is being sent)
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
	# nto.live=1: the NMI is to land while a soft dump is being sent
	if [ "$(arg live)" = 1 ]; then
		echo 1000 >/sys/module/netoops/parameters/pace_us
		taskset 1 sh -c 'echo y >/proc/sysrq-trigger' &
		n=0
		while [ "$(cat $sys/dumps_sent)" = 0 ]; do
			n=$((n + 1))
			[ $n -gt 100000 ] && fail "the soft dump never started"
		done
	fi
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
