# SPDX-License-Identifier: GPL-2.0
# Benchmark: messages per second written to /dev/kmsg with no netconsole,
# with the in-tree one and with ours, each sending to the same targets
# (one basic, one extended) on the host.  Reports
# "rate MODE MESSAGES CENTISECONDS PACKETS-SENT".
. /tests/lib.sh
. /tests/nc_lib.sh
mac=$(arg hostmac ff:ff:ff:ff:ff:ff)
secs=$(arg secs 2)
targets="b1 e1"
echo on >/proc/sys/kernel/printk_devkmsg

short="<6>nc-bench a short line of forty characters"
medium="<6>nc-bench medium $(awk 'BEGIN { for (i = 0; i < 18; i++) printf "%010d", i }')"
long="<6>nc-bench long $(awk 'BEGIN { for (i = 0; i < 88; i++) printf "%010d", i }')"

now() {
	read -r up _ </proc/uptime
	echo "${up%.*}${up#*.}"
}

# write the mix for $secs seconds; prints "COUNT CENTISECONDS"
flood() {
	exec 3>/dev/kmsg
	n=0
	start=$(now)
	end=$((start + secs * 100))
	t=$start
	while [ "$t" -lt "$end" ]; do
		printf '%s\n' "$short" >&3
		printf '%s\n' "$medium" >&3
		printf '%s\n' "$short" >&3
		printf '%s\n' "$long" >&3
		printf '%s\n' "$short" >&3
		n=$((n + 5))
		read -r up _ </proc/uptime
		t=${up%.*}${up#*.}
	done
	exec 3>&-
	echo "$n $((t - start))"
}

bench() {
	who=$1
	if [ "$who" != none ]; then
		nc_load "$who"
		nc_target b1 eth0 "$NTO_IP" "$NTO_HOST" 6801 "$mac" 0
		nc_target e1 eth0 "$NTO_IP" "$NTO_HOST" 6802 "$mac" 1
		for t in $targets; do
			echo 1 >$CFG/$t/enabled || fail "enable $t"
		done
	fi
	sleep 1
	read -r tx0 </sys/class/net/eth0/statistics/tx_packets
	out=$(flood)
	read -r tx1 </sys/class/net/eth0/statistics/tx_packets
	result rate "$who $out $((tx1 - tx0))"
	if [ "$who" != none ]; then
		for t in $targets; do
			echo 0 >$CFG/$t/enabled
			rmdir $CFG/$t
		done
		nc_unload "$who"
	fi
}

for who in $(arg order none+ref+ours | tr + " "); do
	bench "$who"
done
result done
