# SPDX-License-Identifier: GPL-2.0
# CPU 1 panics while CPU 0 is in the middle of a long soft dump: the panic
# stops CPU 0 with the soft dump half sent, and must still send its own.
. /tests/lib.sh
. /tests/netoops_lib.sh
netoops_load pace_us=1000
netoops_setid
pad_log 100000
taskset 1 sh -c 'echo y >/proc/sysrq-trigger' &
# dumps_sent turns 1 when CPU 0 has started sending.
n=0
while [ "$(cat $sys/dumps_sent)" = 0 ]; do
	n=$((n + 1))
	[ $n -gt 100000 ] && fail "the soft dump never started"
done
taskset 2 sh -c 'echo c >/proc/sysrq-trigger'
fail "the panic returned"
