# SPDX-License-Identifier: GPL-2.0
# CPU 1 panics while CPU 0 is in the middle of a long soft dump: the panic
# stops CPU 0 with the soft dump half sent, and must still send its own.
. /tests/lib.sh
. /tests/netoops_lib.sh
netoops_load pace_us=1000
netoops_setid
pad_log 100000
soft_dump_on_cpu0
taskset 2 sh -c 'echo c >/proc/sysrq-trigger'
fail "the panic returned"
