#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The test rig's eyes on the Debian machine (qemu/debian-vm.sh): QEMU hands
# this script over as fw_cfg opt/netoops/probe, nto-probe.service runs it once
# the machine is up.  It reports what it sees on the result port
# (/dev/ttyS1), then crashes the machine with sysrq c.  It loads nothing:
# what is armed, netoops.service armed.
out=/dev/ttyS1
result() { echo "$*" >"$out"; }
lines() { # KEY: each line of stdin as "KEY line"
	while IFS= read -r l; do result "$1 $l"; done
}

result NTO-BOOTED
result system_state "$(systemctl is-system-running --wait)"
result multi_user "$(systemctl is-active multi-user.target)"
systemctl --failed --plain --no-legend | lines failed_unit
result netoops_enabled "$(systemctl is-enabled netoops.service)"
result netoops_active "$(systemctl is-active netoops.service)"
systemctl status netoops.service --no-pager --lines=30 | lines status
result armed_us "$(systemctl show -p ActiveEnterTimestampMonotonic --value netoops.service)"
result collector_active "$(systemctl is-active netoops-collector.service)"
result collector_user "$(ps -o user= -p "$(systemctl show -p MainPID --value netoops-collector.service)")"
# the service creates its database once Python has started (seconds under TCG)
i=0
while [ $i -lt 300 ] && [ ! -e /var/lib/netoops/collector.sqlite3 ]; do
	sleep 0.1
	i=$((i + 1))
done
result collector_db "$(ls /var/lib/netoops/ 2>&1 | tr '\n' ' ')"
# /etc/netoops/collector.toml asks for the metrics in a textfile (every 2 s)
i=0
while [ $i -lt 100 ] && [ ! -s /var/lib/netoops/netoops.prom ]; do
	sleep 0.1
	i=$((i + 1))
done
grep '^netoops_collector_packets_total' /var/lib/netoops/netoops.prom | lines collector_metric
netoops-arm status | lines arm_status
result release "$(uname -r)"
result uname_v "$(uname -v)"
result kernels "$(ls /lib/modules | tr '\n' ' ')"
for k in /lib/modules/*; do
	result built "${k##*/} $(ls "$k/updates/dkms" 2>/dev/null | tr '\n' ' ')"
done
for m in netconsole netoops netpoll_targets; do
	result path_$m "$(modinfo -n $m)"
	result signer_$m "$(modinfo -F signer $m)"
	result version_$m "$(cat /sys/module/$m/version 2>/dev/null)"
done
result loaded "$(cut -d' ' -f1 /proc/modules | grep -E '^(netoops|netpoll_targets|netconsole)$' | sort | tr '\n' ' ')"
result mode "$(cat /sys/kernel/netoops/mode)"
result boot_id "$(cat /proc/sys/kernel/random/boot_id)"
result netoops_boot_id "$(cat /sys/kernel/netoops/netoops_boot_id)"
result blob "$(cat /sys/kernel/netoops/netoops_user_blob)"
result ifname "$(ip -o -4 addr show scope global | awk '{print $2; exit}')"
dkms status | lines dkms

# A target whose device comes late, and one whose device never comes: the
# administrator adds both and restarts the unit.
conf=/etc/default/netoops
cp "$conf" /tmp/netoops.conf.orig
. "$conf"
sed -i "s|^NETOOPS_TARGETS=.*|NETOOPS_TARGETS=\"$NETOOPS_TARGETS @198.51.100.2/vnto0,2004@198.51.100.1 @198.51.100.2/ghost0,2004@198.51.100.1 @2001:db8::2/enp0s3,2004@192.0.2.1\"|;
	s|^NETOOPS_WAIT=.*|NETOOPS_WAIT=6|" "$conf"
since=$(date '+%Y-%m-%d %H:%M:%S')
systemctl restart netoops.service &
restart=$!
# the device comes once the unit waits for it
i=0
while [ $i -lt 100 ] && ! journalctl -u netoops.service --since "$since" -o cat |
	grep -q 'waiting .* for vnto0'; do
	sleep 0.1
	i=$((i + 1))
done
ip link add vnto0 type veth peer name vnto1
ip addr add 198.51.100.2/24 dev vnto0
ip link set vnto1 up
ip link set vnto0 up
wait $restart
result late_restart_rc "$?"
result late_active "$(systemctl is-active netoops.service)"
journalctl --sync
journalctl -b -u netoops.service --no-pager -o cat | lines late_log
netoops-arm status | lines late_status
cp /tmp/netoops.conf.orig "$conf"
sync
result crashing
echo c >/proc/sysrq-trigger
