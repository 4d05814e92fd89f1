# SPDX-License-Identifier: GPL-2.0
# netconsole and netoops on one machine, as a fleet runs them: an
# extended netconsole target to the collector's port 6666 with the
# release in front, a userdata entry and the CPU number, and (nto.end=crash)
# netoops to port 2004.  Some lines, a long record (ncfrag pieces), then:
#   nto.end=crash   a NULL dereference; oops=panic sends the dump
#   nto.end=silent  no netoops: report "silent" and wait for the host to
#                   pull the plug
. /tests/lib.sh
. /tests/netoops_lib.sh
. /tests/nc_lib.sh
mac=$(arg hostmac ff:ff:ff:ff:ff:ff)
end=$(arg end crash)
nc_load ours
nc_target fleet eth0 "$NTO_IP" "$NTO_HOST" 6666 "$mac" 1
echo 1 >$CFG/fleet/release || fail "release"
mkdir $CFG/fleet/userdata/rack || fail "userdata key"
echo r42 >$CFG/fleet/userdata/rack/value || fail "userdata value"
echo 1 >$CFG/fleet/userdata/cpu_nr || fail "cpu_nr"
echo 1 >$CFG/fleet/enabled || fail "enable"
if [ "$end" = crash ]; then
	netoops_load
	netoops_setid
fi
i=0
while [ $i -lt 20 ]; do
	kmsg "<6>nc-stream $end line $i"
	i=$((i + 1))
done
# with the release, the userdata and the CPU: over 1000 bytes, so pieces
kmsg "<4>nc-stream $end long $(head -c 960 /dev/zero | tr '\0' L)"
result release "$(uname -r)"
case $end in
crash)
	result ready
	insmod /lib/modules/nto/nto_crash.ko mode=null ;;
silent)
	kmsg "<6>nc-stream last words"
	sleep 1
	result silent
	sleep 300 ;;
esac
result alive
