# SPDX-License-Identifier: GPL-2.0
# The guest boots and runs a script; it reports what it sees.
. /tests/lib.sh
result uname "$(uname -r)"
result ncpu "$(grep -c ^processor /proc/cpuinfo)"
check "configfs mounted" grep -q configfs /proc/mounts
check "eth0 present" test -e /sys/class/net/eth0
insmod /lib/modules/nto/nto_crash.ko mode=none 2>/dev/null &&
	fail "nto_crash accepted mode=none"
result modules "$(ls /lib/modules/nto | tr '\n' ' ')"
result done
