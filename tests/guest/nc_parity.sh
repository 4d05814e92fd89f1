# SPDX-License-Identifier: GPL-2.0
# Parity with the in-tree 6.1 netconsole: the same configfs session, the
# same messages and the same dmesg scenario, first with the in-tree module
# and then with ours.  The host compares the UDP payloads (ports 66x1 basic,
# 66x2 extended; x=0 in-tree, x=1 ours) and the result lines.
. /tests/lib.sh
. /tests/nc_lib.sh
mac=$(arg hostmac ff:ff:ff:ff:ff:ff)

echo on >/proc/sys/kernel/printk_devkmsg
nc_align 400
echo 8 >/proc/sys/kernel/printk

# Report every attribute of a target as "<key> <name>=<value>"
nc_report() {
	for f in $(ls "$CFG/$2"); do
		result "$1" "$f=$(cat "$CFG/$2/$f")"
	done
}

# Run a write, report its outcome as "<key> <step> <rc or error text>"
step() {
	key=$1
	name=$2
	shift 2
	if out=$(sh -c "$*" 2>&1); then
		result "$key" "$name ok"
	else
		result "$key" "$name ${out##*: }"
	fi
}

run() {
	who=$1
	port=$2

	# wire: a basic and an extended target, each to its own port
	nc_load "$who"
	nc_target b eth0 "$NTO_IP" "$NTO_HOST" "${port}1" "$mac" 0
	nc_target e eth0 "$NTO_IP" "$NTO_HOST" "${port}2" "$mac" 1
	echo 1 >$CFG/b/enabled || fail "$who: enable b"
	echo 1 >$CFG/e/enabled || fail "$who: enable e"
	sleep 1
	nc_messages "$who"
	sleep 1
	echo 0 >$CFG/b/enabled
	echo 0 >$CFG/e/enabled
	rmdir $CFG/b $CFG/e
	nc_unload "$who"

	# dmesg and configfs: parameter targets, then a configfs target
	kmsg "<6>nc-scenario $who"
	nc_load "$who" "netconsole=+6665@$NTO_IP/eth0,6690@$NTO_HOST/$mac;6666@$NTO_IP/eth0,6691@$NTO_HOST/$mac"
	mkdir $CFG/d
	nc_report "cfg_new_$who" d
	step "rc_$who" dev_name "echo eth0 > $CFG/d/dev_name"
	step "rc_$who" local_ip "echo $NTO_IP > $CFG/d/local_ip"
	step "rc_$who" remote_ip "echo $NTO_HOST > $CFG/d/remote_ip"
	step "rc_$who" remote_port "echo 6692 > $CFG/d/remote_port"
	step "rc_$who" remote_mac "echo $mac > $CFG/d/remote_mac"
	step "rc_$who" enable "echo 1 > $CFG/d/enabled"
	nc_report "cfg_on_$who" d
	step "rc_$who" enable_again "echo 1 > $CFG/d/enabled"
	step "rc_$who" port_enabled "echo 6693 > $CFG/d/remote_port"
	step "rc_$who" disable "echo 0 > $CFG/d/enabled"
	step "rc_$who" disable_again "echo 0 > $CFG/d/enabled"
	nc_report "cfg_off_$who" d
	mkdir $CFG/x
	step "rc_$who" nodev "echo nosuch0 > $CFG/x/dev_name"
	step "rc_$who" enable_nodev "echo 1 > $CFG/x/enabled"
	# 6.1 half-applies this one (local_ip changes); only the message is
	# compared
	step "rc_$who" ip6_garbage "echo 'fe80::1 x' > $CFG/x/local_ip"
	step "rc_$who" rmmod_busy "rmmod netconsole"
	rmdir $CFG/x
	step "rc_$who" extended "echo 1 > $CFG/d/extended"
	step "rc_$who" enable_ext "echo 1 > $CFG/d/enabled"
	rmdir $CFG/d
	nc_unload "$who"
	nc_dmesg_since "nc-scenario $who" | while read -r line; do
		result "dmesg_$who" "$line"
	done
}

run ref 660
run ours 661
result done
