# SPDX-License-Identifier: GPL-2.0
# The in-tree 6.1 netconsole delivers a kernel message to the host.
. /tests/lib.sh
hostmac=$(arg hostmac ff:ff:ff:ff:ff:ff)
refmod netconsole "netconsole=6665@$NTO_IP/eth0,6666@$NTO_HOST/$hostmac"
check "netconsole logging started" dmesg | grep -q "netconsole: network logging started"
msg=$(arg msg hello)
echo "<4>nto-smoke: $msg" >/dev/kmsg
result sent "$msg"
# Give the host a moment to see it before the machine goes away.
sleep 1
