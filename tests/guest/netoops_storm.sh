# SPDX-License-Identifier: GPL-2.0
# An oops storm with panic_on_oops=0: 50 oopses in a row.  netoops sends
# dump_limit of them and counts the rest; the panic after them is sent all
# the same.
. /tests/lib.sh
. /tests/netoops_lib.sh
netoops_load
netoops_setid
insmod /lib/modules/nto/nto_crash.ko mode=trigger || fail "insmod trigger"
i=0
while [ $i -lt 50 ]; do
	sh -c 'echo 1 >/proc/nto_oops' 2>/dev/null
	i=$((i + 1))
done
result counters "$(counters)"
echo c >/proc/sysrq-trigger
fail "the panic returned"
