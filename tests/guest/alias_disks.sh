# SPDX-License-Identifier: GPL-2.0
# Aliases on several disks at once: two SCSI disks of 16 and 24 MiB (the
# second fails reads at sector 4096 through QEMU's blkdebug) and an NVMe
# disk that fails reads at LBA 4096 the same way.
#   two      two writers, one per disk, at once; then two writers on one disk
#   ioerr    the block layer's and NVMe's I/O error lines name the alias
#   remove   20 rounds: alias, reads with SCSI logging on, delete the disk
#            during the traffic, rescan the host; the new disk has no alias
. /tests/lib.sh
. /tests/alias_lib.sh

# The kernel name of the SCSI disk with SECTORS sectors.
disk_of_size() {
	for d in /sys/block/sd*; do
		[ "$(cat "$d/size" 2>/dev/null)" = "$1" ] && echo "${d##*/}" && return
	done
}

A16=32768
A24=49152
a=$(disk_of_size $A16)
b=$(disk_of_size $A24)
[ -n "$a" ] && [ -n "$b" ] || fail "SCSI disks not found: '$a' '$b'"
nv=nvme0n1
check "NVMe disk" test -e /sys/block/$nv/alias_name
result disks "$a $b $nv"

# two: each writer writes its own names to its own disk, and reads its disk
# back after every write; a name of the other disk's set is a crossed alias.
alias_mark two
writer() { # DISK TAG ROUNDS
	n=0
	while [ $n -lt "$3" ]; do
		echo "$2_$((n % 7))" >"/sys/block/$1/alias_name" ||
			echo "write $2 failed" >>/tmp/errors
		read -r x <"/sys/block/$1/alias_name"
		case $x in
		"$2"_*) ;;
		*) echo "$1 read '$x'" >>/tmp/crossed ;;
		esac
		n=$((n + 1))
	done
	echo "$2_last" >"/sys/block/$1/alias_name"
}
writer "$a" left 150 &
writer "$b" right 150 &
wait
result two_a "$(cat /sys/block/$a/alias_name)"
result two_b "$(cat /sys/block/$b/alias_name)"
result crossed "$(cat /tmp/crossed 2>/dev/null | head -3 | tr '\n' ' ')"
# Two writers replacing the alias of one disk: one of them wins.
writer "$a" up 100 2>/dev/null &
writer "$a" down 100 2>/dev/null &
wait
result same_disk "$(cat /sys/block/$a/alias_name)"
result same_disk_b "$(cat /sys/block/$b/alias_name)"
result errors "$(cat /tmp/errors 2>/dev/null | sort | uniq -c | tr '\n' ' ')"

# ioerr: the failing sector of each disk, read with the alias set.
alias_mark ioerr
echo bad_scsi >"/sys/block/$b/alias_name" || fail "alias bad_scsi"
echo bad_nvme >/sys/block/$nv/alias_name || fail "alias bad_nvme"
dd if="/dev/$b" of=/dev/null bs=512 skip=4096 count=8 iflag=direct 2>/dev/null &&
	fail "reading the failing sector of $b worked"
dd if=/dev/$nv of=/dev/null bs=512 skip=4096 count=8 iflag=direct 2>/dev/null &&
	fail "reading the failing LBA of $nv worked"
# The same reads without an alias name the kernel name.
echo >"/sys/block/$b/alias_name"
echo >/sys/block/$nv/alias_name
alias_mark ioerr-plain
sleep 5	# printk_ratelimited: a burst of 10 per 5 s
dd if="/dev/$b" of=/dev/null bs=512 skip=4096 count=8 iflag=direct 2>/dev/null
dd if=/dev/$nv of=/dev/null bs=512 skip=4096 count=8 iflag=direct 2>/dev/null
alias_mark ioerr-done

# remove: the console shows warnings and worse only; the log keeps the rest.
# The other disk keeps its alias throughout.
echo stays_b >"/sys/block/$b/alias_name" || fail "alias stays_b"
echo 5 >/proc/sys/kernel/printk
rounds=$(arg rounds 20)
i=1
while [ $i -le "$rounds" ]; do
	d=$(disk_of_size $A16)
	[ -n "$d" ] || fail "round $i: no 16 MiB disk"
	echo "gone_$i" >"/sys/block/$d/alias_name" || fail "round $i: alias"
	# MLCOMPLETE 2, HLCOMPLETE 2: every completion logs under the alias.
	echo $(((2 << 12) | (2 << 24))) >/proc/sys/dev/scsi/logging_level
	(
		while dd if="/dev/$d" of=/dev/null bs=4k count=64 iflag=direct \
			2>/dev/null; do :; done
	) &
	reader=$!
	hctl=$(basename "$(readlink "/sys/block/$d/device")")
	sleep 0.5
	echo "alias-test: remove-$i $d" >/dev/kmsg
	echo 1 >"/sys/block/$d/device/delete"
	wait $reader
	echo 0 >/proc/sys/dev/scsi/logging_level
	# Scan only the target the disk was on: a full scan takes seconds.
	echo "$hctl" | (IFS=: read -r h c t l
		echo "$c $t $l" >"/sys/class/scsi_host/host$h/scan")
	n=0
	while [ -z "$(disk_of_size $A16)" ] && [ $n -lt 200 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	new=$(disk_of_size $A16)
	[ -n "$new" ] || fail "round $i: the disk did not come back"
	# round I OLD NEW <alias bytes of NEW> <commands logged under the
	# alias> <cache syncs at removal logged under the alias>
	result round "$i $d $new $(wc -c <"/sys/block/$new/alias_name")" \
		"$(dmesg | grep -c -F "[gone_$i] tag#")" \
		"$(dmesg | grep -c -F "[gone_$i] Synchronizing SCSI cache")"
	i=$((i + 1))
done
echo 7 >/proc/sys/kernel/printk
result other_alias "$(cat /sys/block/$b/alias_name)"
result done
