# SPDX-License-Identifier: GPL-2.0
# Our netconsole: parameter targets (extended, basic, IPv6) at insmod, the
# configfs life cycle, input checking, -EBUSY while enabled, module
# reference rules and unloading with targets enabled.
#
# Host listeners: 6701 extended param, 6702 basic param, 6703 IPv6 param,
# 6704/6705 the configfs target before/after its port changed, 6706 an IPv6
# configfs target, 6707 a configfs target and 6708 a param target with the
# release flag (upstream 6.6), 6710 a target with userdata and sysdata.
. /tests/lib.sh
. /tests/nc_lib.sh
mac=$(arg hostmac ff:ff:ff:ff:ff:ff)
echo on >/proc/sys/kernel/printk_devkmsg
result release "$(uname -r)"

# value NAME ATTR: the attribute of a target
value() {
	cat "$CFG/$1/$2"
}

# same NAME ATTR WANT: the attribute still holds WANT
same() {
	[ "$(value "$1" "$2")" = "$3" ] ||
		fail "$1/$2 is '$(value "$1" "$2")', wanted '$3'"
}

# bad ERRTEXT NAME ATTR VALUE...: each write fails with ERRTEXT and
# changes nothing
bad() {
	err=$1
	t=$2
	a=$3
	shift 3
	before=$(value "$t" "$a")
	for v in "$@"; do
		expect_errno "$err" sh -c "echo '$v' > $CFG/$t/$a"
		same "$t" "$a" "$before"
	done
	result bad_ok "$t/$a"
}

# --- parameter targets -------------------------------------------------
p1="+6665@$NTO_IP/eth0,6701@$NTO_HOST/$mac"
p2="6666@$NTO_IP/eth0,6702@$NTO_HOST/$mac"
NTO_IP6=2001:db8::${NTO_IP##*.}
p3="6667@$NTO_IP6/eth0,6703@$NTO_HOST6/$mac"
# upstream's 'r' (6.6): the release in front of each extended record
p4="+r6668@$NTO_IP/eth0,6708@$NTO_HOST/$mac"
nc_load ours "netconsole=$p1;$p2;$p3;$p4"
kmsg "<4>nc-cfg param hello"
expect_errno "unavailable" rmmod netpoll_targets
check "netpoll_targets still loaded" grep -q '^netpoll_targets ' /proc/modules
result refused rmmod_netpoll_targets

# --- configfs life cycle ---------------------------------------------
mkdir $CFG/t || fail "mkdir t"
result defaults "$(for f in enabled extended release dev_name local_port remote_port local_ip remote_ip local_mac remote_mac; do
	printf '%s=%s ' $f "$(value t $f)"; done)"
echo eth0 >$CFG/t/dev_name
echo "$NTO_IP" >$CFG/t/local_ip
echo "$NTO_HOST" >$CFG/t/remote_ip
echo 6704 >$CFG/t/remote_port
echo "$mac" >$CFG/t/remote_mac
echo 1 >$CFG/t/enabled || fail "enable t"
same t enabled 1
same t local_mac "$(cat /sys/class/net/eth0/address)"
kmsg "<4>nc-cfg t one"

# -EBUSY while enabled, for every parameter
for a in dev_name:eth0 local_port:7000 remote_port:7001 local_ip:10.0.0.1 \
	 remote_ip:10.0.0.2 remote_mac:00:11:22:33:44:55 extended:1; do
	attr=${a%%:*}
	before=$(value t "$attr")
	expect_errno "Device or resource busy" sh -c "echo '${a#*:}' > $CFG/t/$attr"
	same t "$attr" "$before"
done
result busy_ok all
expect_errno "Invalid argument" sh -c "echo 1 > $CFG/t/enabled"

echo 0 >$CFG/t/enabled || fail "disable t"
same t enabled 0
same t local_mac ff:ff:ff:ff:ff:ff
kmsg "<4>nc-cfg t off"
echo 6705 >$CFG/t/remote_port || fail "change port"
echo 1 >$CFG/t/enabled || fail "re-enable t"
kmsg "<4>nc-cfg t two"

# oops_only: nothing goes out unless an oops is in progress
echo 1 >/sys/module/netconsole/parameters/oops_only || fail "oops_only"
kmsg "<4>nc-cfg oops only"
echo 0 >/sys/module/netconsole/parameters/oops_only

# --- input checking on a disabled target -----------------------------
mkdir $CFG/v
echo 6000 >$CFG/v/local_port
echo 10.1.2.3 >$CFG/v/local_ip
echo 10.1.2.4 >$CFG/v/remote_ip
echo 00:11:22:33:44:55 >$CFG/v/remote_mac
bad "Invalid argument" v local_port 70000 65536 abc -1 "" 12x " "
bad "Invalid argument" v remote_port 70000 abc "" 0x
bad "Invalid argument" v local_ip 300.1.1.1 1.2.3 1.2.3.4.5 abc "" "1.2.3.4 x" \
	"2001:db8::1::2" "fe80::1 x" "gggg::1" ":"
bad "Invalid argument" v remote_ip 256.0.0.1 "10.0.0" "" "2001:db8:::1" "::g"
bad "Invalid argument" v remote_mac 00:11:22:33:44 00:11:22:33:44:zz \
	00:11:22:33:44:55:66 "" 001122334455
bad "Invalid argument" v enabled 2 -1 abc "" yes
bad "Invalid argument" v extended 2 abc ""
bad "Invalid argument" v dev_name ""
bad "File name too long" v dev_name abcdefghijklmnopq
same v local_port 6000
same v local_ip 10.1.2.3
same v enabled 0
# valid IPv6 makes the target IPv6; IPv4 is refused from then on (6.1)
echo 2001:db8::2 >$CFG/v/local_ip || fail "v6 local"
bad "Invalid argument" v local_ip 10.0.0.1
rmdir $CFG/v

# --- the release flag (upstream 6.6): extended targets only ------------
nc_target r eth0 "$NTO_IP" "$NTO_HOST" 6707 "$mac" 0
bad "Invalid argument" r release 2 abc ""
echo y >$CFG/r/release || fail "release=y"
same r release 1
expect_errno "Invalid argument" sh -c "echo 1 > $CFG/r/enabled"
same r enabled 0
check "release without extended logged" sh -c \
	"dmesg | tail -n 5 | grep -q 'Not enabling netconsole. Release feature requires extended log message'"
echo 1 >$CFG/r/extended
echo 1 >$CFG/r/enabled || fail "enable r"
expect_errno "Device or resource busy" sh -c "echo 0 > $CFG/r/release"
same r release 1
kmsg "<4>nc-cfg release hello"
# a long record: two pieces, each with the release in front
kmsg "<4>nc-cfg release long $(head -c 960 /dev/zero | tr '\0' r)"
rmdir $CFG/r

# --- userdata and sysdata (upstream 6.9, 6.15, 6.17), to port 6710 -----
U=$CFG/u/userdata
nc_target u eth0 "$NTO_IP" "$NTO_HOST" 6710 "$mac" 1
check "userdata/ made with the target" test -d $U
result sysdata_defaults "$(for f in cpu_nr taskname_enabled release_enabled msgid_enabled; do
	printf '%s=%s ' $f "$(cat $U/$f)"; done)"
echo 1 >$CFG/u/enabled || fail "enable u"
kmsg "<4>nc-cfg ud none"
# keys are editable while the target is enabled; one without a value is not sent
mkdir $U/rack $U/role $U/empty || fail "mkdir keys"
echo 7 >$U/rack/value || fail "rack"
echo "web server" >$U/role/value || fail "role"
same u/userdata/role value "web server"
kmsg "<4>nc-cfg ud two"
bad "Invalid argument" u/userdata cpu_nr 2 abc ""
for f in cpu_nr taskname_enabled release_enabled msgid_enabled; do
	echo 1 >$U/$f || fail "$f"
done
taskset 2 sh -c 'echo "<4>nc-cfg sysdata one" >/dev/kmsg'
taskset 2 sh -c 'echo "<4>nc-cfg sysdata two" >/dev/kmsg'
# a long record: its text, userdata and sysdata go in ncfrag pieces
kmsg "<4>nc-cfg ud long $(head -c 900 /dev/zero | tr '\0' u)"
echo 0 >$U/cpu_nr
echo 0 >$U/taskname_enabled
echo 0 >$U/msgid_enabled
# limits: a 53-byte key, a 199-byte value (and echo's newline)
k53=$(head -c 53 /dev/zero | tr '\0' k)
mkdir $U/$k53 || fail "53-byte key"
expect_errno "File name too long" mkdir $U/${k53}k
v199=$(head -c 199 /dev/zero | tr '\0' v)
echo "$v199" >$U/$k53/value || fail "199-byte value"
expect_errno "Message too long" sh -c "echo ${v199}v >$U/$k53/value"
same u/userdata/$k53 value "$v199"
kmsg "<4>nc-cfg ud limits"
# 256 keys at most: four made, 252 more, then one too many
i=0
while [ $i -lt 252 ]; do
	mkdir $U/x$i || fail "key $i"
	i=$((i + 1))
done
expect_errno "No space left on device" mkdir $U/x252
expect_errno "Directory not empty" rmdir $CFG/u
i=0
while [ $i -lt 252 ]; do
	rmdir $U/x$i
	i=$((i + 1))
done
rmdir $U/$k53 $U/empty $U/role
kmsg "<4>nc-cfg ud after rmdir"
rmdir $U/rack
echo 0 >$U/release_enabled
kmsg "<4>nc-cfg ud off"
rmdir $CFG/u || fail "rmdir u"

# --- an IPv6 configfs target -------------------------------------------
mkdir $CFG/t6
echo eth0 >$CFG/t6/dev_name
echo "$NTO_IP6" >$CFG/t6/local_ip
echo "$NTO_HOST6" >$CFG/t6/remote_ip
echo 6706 >$CFG/t6/remote_port
echo "$mac" >$CFG/t6/remote_mac
echo 1 >$CFG/t6/extended
echo 1 >$CFG/t6/enabled || fail "enable t6"
same t6 local_ip "$NTO_IP6"
kmsg "<4>nc-cfg t6 hello"

# --- unloading ---------------------------------------------------------
expect_errno "unavailable" rmmod netconsole
rmdir $CFG/t6
rmdir $CFG/t      # while enabled
kmsg "<4>nc-cfg after rmdir"
sleep 1
rmmod netconsole || fail "rmmod with enabled parameter targets"
check "targets stopped on unload" sh -c \
	"dmesg | grep -q 'netconsole: network logging stopped on interface eth0 as it unregistered'"
rmmod netpoll_targets || fail "rmmod netpoll_targets"
kmsg "<4>nc-cfg unloaded"

# a bad parameter fails the load and leaves nothing behind
kmod netpoll_targets
if insmod /lib/modules/nto/netconsole.ko "netconsole=$p2;6666@$NTO_IP/eth0,x@y" 2>/dev/null; then
	fail "bad parameter accepted"
fi
check "cleaning up logged" sh -c "dmesg | tail -n 10 | grep -q 'netconsole: cleaning up'"
# 'r' without the '+': refused, as upstream does
if insmod /lib/modules/nto/netconsole.ko "netconsole=r6666@$NTO_IP/eth0,6709@$NTO_HOST/$mac" 2>/dev/null; then
	fail "r without + accepted"
fi
check "r without + logged" sh -c \
	"dmesg | tail -n 10 | grep -q 'Release feature requires extended log message'"
check "no configfs dir left" test ! -e $CFG
nc_load_again() {
	insmod /lib/modules/nto/netconsole.ko || fail "reload"
}
nc_load_again
nc_unload ours
result done
