# SPDX-License-Identifier: GPL-2.0
# Helpers for the nc_*.sh netconsole scripts; sourced after /tests/lib.sh.
#
#   nc_load ours|ref [PARAMS]  load our netconsole (with netpoll_targets) or
#                              the in-tree one
#   nc_unload ours|ref         unload it again
#   nc_target NAME DEV LOCAL REMOTE PORT MAC [EXT]
#                              make and fill in a configfs target (disabled)
#   nc_messages TAG            log the parity sequence, framed by markers
#   nc_seq                     sequence number the next record will get
#   nc_align N                 make sure the next N records and the next
#                              minute keep the width of seq and timestamp
#   nc_dmesg_since MARK        netconsole's log lines after the line MARK

CFG=/sys/kernel/config/netconsole

nc_load() {
	which=$1
	shift
	if [ "$which" = ours ]; then
		kmod netpoll_targets
		kmod netconsole "$@"
	else
		refmod netconsole "$@"
	fi
}

nc_unload() {
	rmmod netconsole || fail "rmmod netconsole ($1)"
	if [ "$1" = ours ]; then
		rmmod netpoll_targets || fail "rmmod netpoll_targets"
	fi
}

nc_target() {
	d=$CFG/$1
	mkdir "$d" || fail "mkdir target $1"
	echo "$2" >"$d/dev_name" || fail "$1 dev_name"
	echo "$3" >"$d/local_ip" || fail "$1 local_ip"
	echo "$4" >"$d/remote_ip" || fail "$1 remote_ip"
	echo "$5" >"$d/remote_port" || fail "$1 remote_port"
	echo "$6" >"$d/remote_mac" || fail "$1 remote_mac"
	echo "${7:-0}" >"$d/extended" || fail "$1 extended"
}

kmsg() {
	printf '%s\n' "$1" >/dev/kmsg
}

# Short lines, every level, a facility, bytes that the extended format
# escapes, a line with embedded newlines, one without a newline, the
# longest record /dev/kmsg takes (991 bytes: two chunks on a basic
# target) and one that escapes to ~3000 bytes (ncfrag pieces on an
# extended target), then a continuation record from sysrq's help.
nc_messages() {
	tag=$1
	kmsg "<6>nc-parity $tag begin"
	for i in 1 2 3; do
		kmsg "<6>nc-parity short $i"
	done
	for l in 0 1 2 3 4 5 6 7; do
		kmsg "<$l>nc-parity level $l"
	done
	kmsg "<30>nc-parity daemon.info"
	kmsg "nc-parity default level"
	printf '<6>nc-parity np \001\002\033[1m\177\200\377 tab\tend back\\slash\n' \
		>/dev/kmsg
	printf '<5>nc-parity multi first\nsecond line\n\nfourth\n' >/dev/kmsg
	printf '<6>nc-parity without newline' >/dev/kmsg
	long=$(awk 'BEGIN { for (i = 0; i < 97; i++) printf "%010d", i }')
	printf '<6>nc-parity long %s___\n' "$long" >/dev/kmsg ||
		fail "long record refused"
	bin=$(printf '\001\002\003\004\005\006\007\010\011\013\014\015\016\017\020\021\022\023\024\025\026\027\030\031\032\033\034\035\036\037\177\200\201\376\377\\;')
	big=
	for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
		big="$big$bin"
	done
	kmsg "<6>nc-parity bin $big"
	echo h >/proc/sysrq-trigger
	kmsg "<6>nc-parity $tag end"
}

nc_seq() {
	echo "<6>nc-seq-probe" >/dev/kmsg
	timeout 1 cat /dev/kmsg | sed -n 's/^[0-9]*,\([0-9]*\),.*;nc-seq-probe$/\1/p' |
		tail -n 1
}

nc_align() {
	seq=$(nc_seq)
	[ -n "$seq" ] || fail "no sequence number"
	end=$((seq + $1))
	if [ ${#end} -ne ${#seq} ]; then
		while [ "$(nc_seq)" -lt "$end" ]; do
			i=0
			while [ $i -lt 50 ]; do
				kmsg "<7>nc-filler $i"
				i=$((i + 1))
			done
		done
	fi
	# timestamps: a run takes under a minute; keep it clear of the
	# extra digit at 10 s, 100 s and 1000 s
	while true; do
		read -r up _ </proc/uptime
		case ${up%%.*} in
		[0-9] | [4-9][0-9] | 9[4-9][0-9]) sleep 1 ;;
		*) break ;;
		esac
	done
}

nc_dmesg_since() {
	dmesg | sed -n "/$1/,\$p" | sed 1d | sed 's/^\[[ 0-9.]*\] //' |
		grep -E '^(netconsole|netpoll|printk: console \[netcon)' || true
}
