# SPDX-License-Identifier: GPL-2.0
# Our netconsole and interface events, on a veth pair inside the guest
# (va sends, vb receives; vb's rx counter shows the traffic): down/up,
# rename, delete and re-add, a parameter target on a deleted interface,
# then a bounded torture run.  Any splat fails the run, except the one
# warning that 6.1's veth gives for every netpoll transmission (veth_xmit
# calls __netif_rx() outside softirq context; the in-tree netconsole
# triggers it just the same); the host checks that it is the only one.
. /tests/lib.sh
. /tests/nc_lib.sh
echo on >/proc/sys/kernel/printk_devkmsg
# warnings and worse reach the consoles; netpoll's chatter does not
echo 5 >/proc/sys/kernel/printk
# no IPv6 on the veths: vb then receives netconsole's packets and nothing
# else
echo 1 >/proc/sys/net/ipv6/conf/default/disable_ipv6

# busybox's ip ignores the peer's name: find the peer and rename it.
# Under TCG every process costs ~0.1 s, so loops use shell builtins.
veth_add() {
	ip link add va type veth || return 1
	read -r idx </sys/class/net/va/iflink
	for n in /sys/class/net/*; do
		read -r i <"$n/ifindex"
		if [ "$i" = "$idx" ]; then
			ip link set "${n##*/}" name vb
			return
		fi
	done
	return 1
}

# veth_up [MAC]: the pair, addressed and up; vb keeps MAC if given (a
# target's remote_mac from before a delete)
veth_up() {
	veth_add || fail "veth add"
	[ -n "$1" ] && ip link set vb address "$1"
	ip addr add 10.99.0.1/24 dev va
	ip addr add 10.99.0.2/24 dev vb
	ip link set vb up
	ip link set va up
}

rx() {
	cat /sys/class/net/vb/statistics/rx_packets 2>/dev/null || echo 0
}

# flowing: vb receives netconsole traffic within a few seconds
flowing() {
	start=$(rx)
	for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
		sleep 0.3
		[ "$(rx)" -gt $((start + 3)) ] && return 0
	done
	return 1
}

# quiet: vb receives nothing for a while
quiet() {
	start=$(rx)
	sleep 1
	[ "$(rx)" -eq "$start" ]
}

# state WANT: the enabled attribute of target v reads WANT
state() {
	[ "$(cat $CFG/v/enabled)" = "$1" ] ||
		fail "v enabled is $(cat $CFG/v/enabled), wanted $1"
}

logged() {
	dmesg | grep -c "netconsole: network logging stopped on interface $1 as it unregistered"
}

writer() {
	i=0
	while [ ! -e /tmp/stop-writer ]; do
		echo "<4>nc-ev $i" >/dev/kmsg
		i=$((i + 1))
		usleep 20000
	done
}

vb_mac() {
	cat /sys/class/net/vb/address
}

nc_load ours
veth_up
nc_target v va 10.99.0.1 10.99.0.2 6666 "$(vb_mac)" 0
echo 1 >$CFG/v/enabled || fail "enable v"
writer &
wpid=$!
check "traffic on va" flowing
result flowing first

# down, rename and back: the target follows the name, as in 6.1
ip link set va down
state 1
check "no traffic while down" quiet
ip link set va name vc || fail "rename"
check "dev_name follows rename" test "$(cat $CFG/v/dev_name)" = vc
state 1
ip link set vc name va
ip link set va up
check "traffic after rename" flowing
result flowing renamed

# delete the interface under traffic
ip link del va || fail "veth del"
sleep 0.5
state 0
check "local_mac reset" test "$(cat $CFG/v/local_mac)" = ff:ff:ff:ff:ff:ff
check "unregister logged" test "$(logged va)" -ge 1
result deleted ok

# re-add: without resume (6.1's way) the target stays off; then re-enable
veth_up
sleep 1
state 0
echo "$(vb_mac)" >$CFG/v/remote_mac
echo 1 >$CFG/v/enabled || fail "re-enable v"
check "traffic after re-add" flowing
result flowing readded

# resume (opt-in): a target with resume=1 comes back with its interface,
# deleted and re-added under traffic, and not while the user turned it off
nc_target r va 10.99.0.1 10.99.0.2 6666 "$(vb_mac)" 0
check "resume off by default" test "$(cat $CFG/r/resume)" = 0
for v in 2 abc ""; do
	expect_errno "Invalid argument" sh -c "echo '$v' > $CFG/r/resume"
done
check "resume unchanged" test "$(cat $CFG/r/resume)" = 0
echo 1 >$CFG/r/resume || fail "resume=1"
echo 0 >$CFG/v/enabled || fail "disable v"
echo 1 >$CFG/r/enabled || fail "enable r"
check "traffic on r" flowing
mac=$(vb_mac)
ip link del va || fail "veth del for resume"
sleep 0.5
[ "$(cat $CFG/r/enabled)" = 0 ] || fail "r still enabled with va gone"
check "waiting logged" sh -c "dmesg | grep -q 'netconsole: network logging resumes when va is back'"
veth_up "$mac"
n=0
while [ "$(cat $CFG/r/enabled)" != 1 ] && [ $n -lt 50 ]; do
	sleep 0.1
	n=$((n + 1))
done
[ "$(cat $CFG/r/enabled)" = 1 ] || fail "r did not resume"
check "resume logged" sh -c "dmesg | grep -q 'netconsole: network logging resumed on interface va'"
check "traffic after resume" flowing
[ "$(cat $CFG/v/enabled)" = 0 ] || fail "v (no resume) came back"
# turned off by the user, it stays off across delete and re-add
echo 0 >$CFG/r/enabled || fail "disable r"
ip link del va
veth_up
sleep 1
[ "$(cat $CFG/r/enabled)" = 0 ] || fail "r resumed though disabled"
# waiting for its interface, then turned off: the wait ends
echo 1 >$CFG/r/enabled || fail "re-enable r"
ip link del va
sleep 0.5
echo 0 >$CFG/r/enabled || fail "disable r while it waits"
expect_errno "Invalid argument" sh -c "echo 0 > $CFG/r/enabled"
veth_up
sleep 1
[ "$(cat $CFG/r/enabled)" = 0 ] || fail "r resumed though turned off while it waited"
rmdir $CFG/r
result resumed ok

touch /tmp/stop-writer
wait $wpid
rm -f /tmp/stop-writer
rmdir $CFG/v
nc_unload ours

# a parameter target whose interface is deleted, then unload
ip link del va
veth_up
nc_load ours "netconsole=6665@10.99.0.1/va,6666@10.99.0.2/$(vb_mac)"
writer &
wpid=$!
check "param target traffic" flowing
ip link del va
sleep 0.5
check "param target stopped" test "$(logged va)" -ge 2
touch /tmp/stop-writer
wait $wpid
rm -f /tmp/stop-writer
nc_unload ours
result param_deleted ok

# a parameter target with resume=1 comes back too
ip link del va
veth_up
mac=$(vb_mac)
nc_load ours resume=1 "netconsole=6665@10.99.0.1/va,6666@10.99.0.2/$mac"
writer &
wpid=$!
check "resume param target traffic" flowing
ip link del va
sleep 0.5
veth_up "$mac"
check "param target resumed" flowing
touch /tmp/stop-writer
wait $wpid
rm -f /tmp/stop-writer
nc_unload ours
check "param resume logged" sh -c "dmesg | grep -c 'network logging resumed on interface va' | grep -qx 2"
ip link del va
result param_resumed ok

# --- torture -------------------------------------------------------------
# Concurrent loops, each bounded by its iteration count and a deadline:
# enable/disable, mkdir/rmdir, link flaps with delete/re-add, messages.
iters=$(arg iters 300)
budget=$(arg budget 90)
read -r up _ </proc/uptime
deadline=$((${up%%.*} + budget))
alive() {
	read -r up _ </proc/uptime
	[ "${up%%.*}" -lt "$deadline" ] && [ ! -e /tmp/stop-all ]
}

nc_load ours
veth_up
nc_target a va 10.99.0.1 10.99.0.2 6666 "$(vb_mac)" 0

toggle() {
	i=0
	while [ $i -lt "$iters" ] && alive; do
		echo 1 >$CFG/a/enabled 2>/dev/null
		echo 0 >$CFG/a/enabled 2>/dev/null
		i=$((i + 1))
	done
	echo $i >/tmp/n-toggle
}

churn() {
	i=0
	while [ $i -lt "$iters" ] && alive; do
		d=$CFG/b$((i % 3))
		if mkdir $d 2>/dev/null; then
			echo va >$d/dev_name
			echo 10.99.0.1 >$d/local_ip
			echo 10.99.0.2 >$d/remote_ip
			echo $((i % 2)) >$d/extended
			echo 1 >$d/enabled 2>/dev/null
		fi
		if [ -d $CFG/b$(((i + 1) % 3)) ]; then
			rmdir $CFG/b$(((i + 1) % 3))
		fi
		i=$((i + 1))
	done
	echo $i >/tmp/n-churn
}

# Mostly delete and re-add (the notifier's NETDEV_UNREGISTER path); every
# fifth time a short down/up instead.  Enabling a target on a device that
# is down costs netpoll_setup() four seconds, so the device is rarely down.
flap() {
	i=0
	while [ $i -lt "$iters" ] && alive; do
		if [ $((i % 5)) -eq 4 ]; then
			ip link set va down 2>/dev/null
			ip link set va up 2>/dev/null
		else
			ip link del va 2>/dev/null
			veth_add 2>/dev/null
			ip link set vb up 2>/dev/null
			ip link set va up 2>/dev/null
		fi
		i=$((i + 1))
	done
	echo $i >/tmp/n-flap
}

# bursts of messages, leaving the CPUs to the other loops in between
spam() {
	i=0
	while alive; do
		echo "<4>nc-torture $i" >/dev/kmsg
		i=$((i + 1))
		[ $((i % 20)) -eq 0 ] && sleep 0.2
	done
	echo $i >/tmp/n-spam
}

toggle &
p1=$!
churn &
p2=$!
flap &
p3=$!
spam &
p4=$!
wait $p1
wait $p2
wait $p3
touch /tmp/stop-all
wait $p4
result torture "toggle=$(cat /tmp/n-toggle) churn=$(cat /tmp/n-churn) flap=$(cat /tmp/n-flap) msgs=$(cat /tmp/n-spam)"

# everything still works afterwards
for d in $CFG/*; do
	echo 0 >$d/enabled 2>/dev/null
	rmdir $d
done
ip link del va 2>/dev/null
veth_up
nc_target w va 10.99.0.1 10.99.0.2 6666 "$(vb_mac)" 0
echo 1 >$CFG/w/enabled || fail "enable after torture"
writer &
wpid=$!
check "traffic after torture" flowing
touch /tmp/stop-writer
wait $wpid
rmdir $CFG/w
nc_unload ours

splat=$(dmesg | awk '
	/cut here/ { cut = 1; next }
	cut && /WARNING: .* __netif_rx/ { skip = 1 }
	{ cut = 0 }
	skip { if (/end trace/) skip = 0; next }
	/BUG:|WARNING:|KASAN|possible circular|possible recursive|inconsistent lock|INFO: possible|suspicious RCU|invalid context|Call Trace/ { print; exit }')
[ -z "$splat" ] || fail "splat: $splat"
# lockdep is still on: nothing switched it off on the way
if [ -e /proc/lockdep_stats ]; then
	result lockdep "$(sed -n 's/^ *debug_locks: *//p' /proc/lockdep_stats)"
fi
result done
