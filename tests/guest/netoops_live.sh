# SPDX-License-Identifier: GPL-2.0
# netoops on a live system: sysfs and configfs input checks, two targets on
# the host plus one whose interface is down, and two soft dumps, the first
# with a log whose length is an exact multiple of 1024 bytes.
. /tests/lib.sh
. /tests/netoops_lib.sh
hostmac=$(arg hostmac ff:ff:ff:ff:ff:ff)
sys=/sys/kernel/netoops
kmod netpoll_targets
kmod netoops "netoops=@$NTO_IP/eth0,2004@$NTO_HOST/$hostmac;6001@$NTO_IP/eth0,2005@$NTO_HOST/$hostmac"

# boot id: decimal or 0x-hex, 32 bits
check "boot id decimal" sh -c "echo 4000000000 > $sys/netoops_boot_id"
check "boot id read" test "$(cat $sys/netoops_boot_id)" = 4000000000
for bad in 4294967296 0x100000000 -1 abc 12abc ""; do
	expect_errno "Invalid argument" sh -c "echo '$bad' > $sys/netoops_boot_id"
done
check "boot id unchanged" test "$(cat $sys/netoops_boot_id)" = 4000000000
check "boot id hex" sh -c "echo 0xfeedf00d > $sys/netoops_boot_id"
check "boot id hex read" test "$(cat $sys/netoops_boot_id)" = $((0xfeedf00d))

# user blob: up to 128 bytes, read back exactly
printf 'rack=7 row=b\n' >$sys/netoops_user_blob || fail "blob write"
check "blob exact" test "$(od -An -c $sys/netoops_user_blob | tr -d ' \n')" = 'rack=7row=b\n'
head -c 129 /dev/zero | tr '\0' x >/tmp/long
expect_errno "Invalid argument" sh -c "cat /tmp/long > $sys/netoops_user_blob"
check "blob unchanged" test "$(cat $sys/netoops_user_blob)" = 'rack=7 row=b'
max=$(head -c 128 /dev/zero | tr '\0' 7)
printf '%s' "$max" >$sys/netoops_user_blob || fail "128-byte blob"
check "128-byte blob" test "$(cat $sys/netoops_user_blob)" = "$max"
printf 'fleet-a/rack-7' >$sys/netoops_user_blob || fail "blob write"
check "modes" test "$(stat -c %a $sys/netoops_boot_id $sys/netoops_user_blob | tr '\n' ' ')" = "644 644 "

# pace_us: 0 to 1000 microseconds; counters are read-only
p=/sys/module/netoops/parameters
check "pace default" test "$(cat $p/pace_us)" = 100
for bad in 1001 4294967296 -1 abc ""; do
	expect_errno "Invalid argument" sh -c "echo '$bad' > $p/pace_us"
done
check "pace unchanged" test "$(cat $p/pace_us)" = 100
check "pace max" sh -c "echo 1000 > $p/pace_us"
check "pace max read" test "$(cat $p/pace_us)" = 1000
echo 100 >$p/pace_us
check "dump_limit default" test "$(cat $p/dump_limit)" = 8
check "counters start at 0" test "$(counters)" = "0 0 0 0"
check "counters read-only" test "$(stat -c %a $sys/dumps_sent $sys/dumps_busy | tr '\n' ' ')" = "444 444 "

# configfs: bad input changes nothing
cfg=/sys/kernel/config/netoops
check "configfs dir" test -d $cfg
mkdir $cfg/down || fail "mkdir target"
expect_errno "Invalid argument" sh -c "echo 70000 > $cfg/down/remote_port"
expect_errno "Invalid argument" sh -c "echo 300.1.1.1 > $cfg/down/remote_ip"
check "port default" test "$(cat $cfg/down/remote_port)" = 2004

# a target whose interface goes down after it was enabled
ip link add vdown0 type veth peer name vdown1 || fail "veth"
ip addr add 192.0.2.200/24 dev vdown0
ip link set vdown0 up
echo vdown0 >$cfg/down/dev_name
echo 192.0.2.200 >$cfg/down/local_ip
echo 192.0.2.201 >$cfg/down/remote_ip
echo 1 >$cfg/down/enabled || fail "enable down target"
ip link set vdown0 down
check "down target still enabled" test "$(cat $cfg/down/enabled)" = 1

# Pad the log so that, with the line sysrq prints, its length is a multiple
# of 1024.  The dump carries the log as syslog(2) reads it (dmesg -r): a line
# costs 20 bytes ("<14>" for a line from userspace, "[    x.xxxxxx] " and
# "\n") plus its text.
sysrq_line=45        # "<6>[    x.xxxxxx] sysrq: Trigger a soft dump\n"
sleep 1              # let asynchronous messages (link up, ...) settle
len=$(dmesg -r | wc -c)
extra=$(( (1024 - (len + sysrq_line) % 1024) % 1024 ))
[ $extra -lt 24 ] && extra=$((extra + 1024))
while [ $extra -gt 0 ]; do
	if [ $extra -ge 600 ]; then t=300; else t=$((extra - 20)); fi
	echo "<6>$(head -c $((t - 3)) /dev/zero | tr "\\0" 0)pad" >/dev/kmsg
	extra=$((extra - t - 20))
done
result loglen "$(( $(dmesg -r | wc -c) + sysrq_line ))"
echo y >/proc/sysrq-trigger
result soft1 "$(dmesg -r | wc -c)"
sleep 1
echo y >/proc/sysrq-trigger
result alive
result counters "$(counters)"
sleep 1
