# SPDX-License-Identifier: GPL-2.0
# Benchmark: printk bursts from nto_flood.ko (timed in the kernel) with no
# netconsole, with the in-tree one and with ours, each with the same four
# targets on the host (two basic, two extended); "oursx" is ours with
# upstream's later features on its extended targets: the release in
# front, two userdata entries and all four sysdata fields.  Reports
# "rate MODE MESSAGES NANOSECONDS PACKETS-SENT".
. /tests/lib.sh
. /tests/nc_lib.sh
mac=$(arg hostmac ff:ff:ff:ff:ff:ff)
rounds=$(arg rounds 400)
targets="b1 b2 e1 e2"

extras() {
	for t in e1 e2; do
		U=$CFG/$t/userdata
		echo 1 >$CFG/$t/release || fail "release $t"
		mkdir $U/rack $U/role || fail "userdata $t"
		echo r42 >$U/rack/value
		echo "web server" >$U/role/value
		for f in cpu_nr taskname_enabled release_enabled msgid_enabled; do
			echo 1 >$U/$f || fail "$f $t"
		done
	done
}

bench() {
	who=$1
	if [ "$who" != none ]; then
		mod=$who
		[ "$who" = oursx ] && mod=ours
		nc_load "$mod"
		nc_target b1 eth0 "$NTO_IP" "$NTO_HOST" 6801 "$mac" 0
		nc_target b2 eth0 "$NTO_IP" "$NTO_HOST" 6802 "$mac" 0
		nc_target e1 eth0 "$NTO_IP" "$NTO_HOST" 6803 "$mac" 1
		nc_target e2 eth0 "$NTO_IP" "$NTO_HOST" 6804 "$mac" 1
		[ "$who" = oursx ] && extras
		for t in $targets; do
			echo 1 >$CFG/$t/enabled || fail "enable $t"
		done
	fi
	sleep 1
	read -r tx0 </sys/class/net/eth0/statistics/tx_packets
	insmod /lib/modules/nto/nto_flood.ko "rounds=$rounds" || fail "insmod nto_flood"
	read -r tx1 </sys/class/net/eth0/statistics/tx_packets
	rmmod nto_flood
	out=$(dmesg | grep 'nto_flood: .* messages in .* ns' | tail -1)
	out=${out#*nto_flood: }
	set -- $out
	result rate "$who $1 $4 $((tx1 - tx0))"
	if [ "$who" != none ]; then
		for t in $targets; do
			echo 0 >$CFG/$t/enabled
			[ -d $CFG/$t/userdata ] && rmdir $CFG/$t/userdata/* 2>/dev/null
			rmdir $CFG/$t
		done
		nc_unload "$mod"
	fi
}

for who in $(arg order none+ref+ours | tr + " "); do
	bench "$who"
done
result done
