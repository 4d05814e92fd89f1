# SPDX-License-Identifier: GPL-2.0
# netoops guest helpers, after `. /tests/lib.sh`:
#   netoops_load [PARAMS]  netpoll_targets (unless loaded) and netoops with one target on
#                          the host (IPv6 when nto.v6=1), pace_us from
#                          nto.pace=, dump_limit from nto.limit=; then
#                          the log padded to nto.pad= bytes, if given
#   netoops_setid          boot id and blob from nto.bootid= and nto.blob=
#   counters               "sent skipped busy deferred" from sysfs
#   soft_dump_on_cpu0      sysrq y on CPU 0, in the background; returns once
#                          it has started sending (dumps_sent turns 1)
#   pad_log BYTES          add lines to the log until it holds BYTES
sys=/sys/kernel/netoops

netoops_load() {
	hostmac=$(arg hostmac ff:ff:ff:ff:ff:ff)
	if [ "$(arg v6 0)" = 1 ]; then
		tgt="@2001:db8::${NTO_IP##*.}/eth0,2004@$NTO_HOST6/$hostmac"
	else
		tgt="@$NTO_IP/eth0,2004@$NTO_HOST/$hostmac"
	fi
	extra=
	[ -n "$(arg pace)" ] && extra="$extra pace_us=$(arg pace)"
	[ -n "$(arg limit)" ] && extra="$extra dump_limit=$(arg limit)"
	[ -d /sys/module/netpoll_targets ] || kmod netpoll_targets
	# shellcheck disable=SC2086
	kmod netoops "netoops=$tgt" $extra "$@"
	[ -n "$(arg pad)" ] && pad_log "$(arg pad)"
	return 0
}

netoops_setid() {
	echo "$(arg bootid 0)" >$sys/netoops_boot_id ||
		fail "boot id not accepted"
	printf '%s' "$(arg blob)" >$sys/netoops_user_blob ||
		fail "blob not accepted"
}

soft_dump_on_cpu0() {
	taskset 1 sh -c 'echo y >/proc/sysrq-trigger' &
	n=0
	while [ "$(cat $sys/dumps_sent)" = 0 ]; do
		n=$((n + 1))
		[ $n -gt 100000 ] && fail "the soft dump never started"
	done
}

counters() {
	echo "$(cat $sys/dumps_sent) $(cat $sys/dumps_skipped)" \
		"$(cat $sys/dumps_busy) $(cat $sys/dumps_deferred)"
}

# KERN_DEBUG lines of 200 characters: in the log (and the dump), not on
# the console.  Enough of them to hold BYTES, written without measuring:
# dmesg reads at most the log buffer's size, so it cannot tell when a full
# buffer holds more than that.
pad_log() {
	line=$(head -c 200 /dev/zero | tr '\0' p)
	n=$(($1 / 200 + 100))
	i=0
	while [ $i -lt $n ]; do
		echo "<7>pad $line" >/dev/kmsg
		i=$((i + 1))
	done
}
