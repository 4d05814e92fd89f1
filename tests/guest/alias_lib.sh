# SPDX-License-Identifier: GPL-2.0
# Helpers for the alias_*.sh scripts; sourced after /tests/lib.sh.
#
#   alias_disk              kernel name of the SCSI disk (sda)
#   alias_mark TEXT         log "alias-test: TEXT" (splits the console)
#   sd_names                the names in "sd H:C:T:L: [name]" dmesg prefixes
#   ev_start                record uevents to /tmp/uevents (alias_uevent.sh)
#   ev_phase NAME           (NAME: letters and digits) wait until every uevent sent so far is recorded,
#                           report those since the last phase as
#                           "ev NAME <action> <devname> ALIAS=..|no-ALIAS"
#                           (or "ev NAME none")
#   ev_stop                 stop the recorder

alias_disk() {
	for d in /sys/block/sd*; do
		if [ -e "$d/alias_name" ]; then
			echo "${d##*/}"
			return 0
		fi
	done
	fail "no SCSI disk with an alias_name attribute"
}

alias_mark() {
	echo "alias-test: $*" >/dev/kmsg
}

sd_names() {
	dmesg | sed -n 's/.* sd [0-9]*:[0-9]*:[0-9]*:[0-9]*: \[\([^]]*\)\].*/\1/p'
}

EV=/tmp/uevents
EV_SEEN=0
EV_PID=

ev_start() {
	: >"$EV"
	busybox uevent sh /tests/alias_uevent.sh &
	EV_PID=$!
	# The recorder is up once it reports a marker uevent.
	i=0
	while ! grep -q "^phase start$" "$EV"; do
		echo "change 00000000-0000-0000-0000-000000000000 PHASE=start" \
			>/sys/class/mem/null/uevent
		i=$((i + 1))
		[ $i -lt 50 ] || fail "uevent recorder did not start"
		sleep 0.2
	done
	EV_SEEN=$(grep -c . "$EV")
}

# uevents reach the recorder in the order the kernel sent them, so once the
# marker sent now is recorded, every earlier uevent is too.
ev_phase() {
	echo "change 00000000-0000-0000-0000-000000000000 PHASE=$1" \
		>/sys/class/mem/null/uevent
	i=0
	while ! grep -q "^phase $1$" "$EV"; do
		i=$((i + 1))
		[ $i -lt 100 ] || fail "uevent marker $1 not seen"
		sleep 0.1
	done
	lines=$(sed -n "$((EV_SEEN + 1)),\$p" "$EV" | grep -v '^phase ')
	EV_SEEN=$(grep -c . "$EV")
	if [ -z "$lines" ]; then
		result ev "$1" none
	else
		echo "$lines" | while read -r l; do result ev "$1" "$l"; done
	fi
}

ev_stop() {
	[ -n "$EV_PID" ] && kill "$EV_PID"
	EV_PID=
}
