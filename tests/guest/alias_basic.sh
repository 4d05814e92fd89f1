# SPDX-License-Identifier: GPL-2.0
# /sys/block/<disk>/alias_name on a virtio-scsi disk with two partitions:
# reading and writing, validation, the uevents and the log lines of a change,
# sd, scsi command and sense messages carrying the alias, and the kernel
# names staying what they were.  The host checks the results and the console
# (split into steps by "alias-test: <step>" lines).
. /tests/lib.sh
. /tests/alias_lib.sh

disk=$(alias_disk)
A=/sys/block/$disk/alias_name
result disk "$disk"
check "partition 1" test -e "/sys/block/$disk/${disk}1"
check "partition 2" test -e "/sys/block/$disk/${disk}2"
result mode "$(stat -c %a "$A")"
result owner "$(stat -c %u:%g "$A")"
result initial_bytes "$(wc -c <"$A")"
result partition_attr "$(ls "/sys/block/$disk/${disk}1/alias_name" 2>/dev/null || echo none)"

ev_start

# Set an alias.
alias_mark set
echo foo >"$A" || fail "writing foo"
result read "$(cat "$A")"
result read_bytes "$(wc -c <"$A")"
ev_phase set

# The same name again is no change.
echo foo >"$A" || fail "writing foo again"
ev_phase same

# sd messages through sd_printk: a cache type change revalidates the disk.
ct=$(echo /sys/block/$disk/device/scsi_disk/*/cache_type)
result cache_type "$(cat "$ct")"
alias_mark cache
echo "write through" >"$ct" || fail "cache_type write through"
echo "write back" >"$ct" || fail "cache_type write back"
# A plain rescan prints nothing (sd only reports what changed): the host
# grows the disk by 16 MiB once it sees resize_ready, and sd reports the new
# capacity under the alias.
alias_mark rescan
size=$(cat "/sys/block/$disk/size")
result resize_ready "$size"
i=0
while [ "$(cat "/sys/block/$disk/size")" = "$size" ] && [ $i -lt 300 ]; do
	sleep 0.1
	i=$((i + 1))
done
echo 1 >"/sys/block/$disk/device/rescan"
result resized "$(cat "/sys/block/$disk/size")"
ev_phase resize

# Sense data: the caching mode page lets only WCE change, so asking for the
# read cache to be disabled is refused with ILLEGAL REQUEST, which sd prints
# with sd_print_sense_hdr().  SCSI logging (MLCOMPLETE 1) also prints the
# failed command, its result and sense through scmd_name().  (A message of
# SCSI_LOG_HLCOMPLETE(1, ...) needs a level above 1.)
alias_mark sense
echo $(((1 << 12) | (2 << 24))) >/proc/sys/dev/scsi/logging_level
expect_errno "Invalid argument" sh -c "echo none > $ct"
# scmd_printk() at completion: sd_done logs with HLCOMPLETE 2.
alias_mark scmd
dd if="/dev/$disk" of=/dev/null bs=4k count=2 iflag=direct 2>/dev/null ||
	fail "direct read"
echo 0 >/proc/sys/dev/scsi/logging_level
alias_mark scmd-done
result cache_type_after "$(cat "$ct")"

# Invalid names change nothing.
alias_mark invalid
long=$(printf '%0256d' 0)
expect_errno "Invalid argument" sh -c "echo 'a b' > $A"
expect_errno "Invalid argument" sh -c "echo 'a/b' > $A"
expect_errno "Invalid argument" sh -c "echo $long > $A"
# (echo, not printf: busybox printf does not report write errors)
# A raw Latin-1 byte (0xe9, é): isalnum() accepts it, only isascii() does not.
printf 'caf\351\n' >/tmp/latin1
result latin1_bytes "$(od -An -tx1 /tmp/latin1 | tr -s ' ')"
expect_errno "Invalid argument" sh -c "cat /tmp/latin1 > $A"
expect_errno "Invalid argument" sh -c "echo -ne '\n\n' > $A"
expect_errno "Invalid argument" sh -c "echo -ne 'foo\n\n' > $A"
expect_errno "Invalid argument" sh -c "echo -ne 'a\000b' > $A"
expect_errno "Invalid argument" sh -c "echo -ne 'tab\t' > $A"
# Names that read like a disk's kernel name: this disk's, its partition's
# and the forms the disk drivers give.
for n in "$disk" sdb sdaa1 nvme0n1 nvme1n2p3 nvme0c1n1 dm-0 md127 loop0 \
	vdb xvda2 sr0 mmcblk0p1 mmcblk0boot1 zram0 nbd3 "${disk}1"; do
	expect_errno "Invalid argument" sh -c "echo $n > $A"
done
# A zero-length write() never reaches the attribute: sysfs returns 0 early.
printf '' >"$A" || fail "empty write failed"
dd if=/dev/null of="$A" 2>/dev/null || fail "empty dd failed"
result after_invalid "$(cat "$A")"
ev_phase invalid

# Only root may write.
alias_mark nonroot
mkdir -p /etc
echo "nobody:x:65534:65534:nobody:/:/bin/sh" >>/etc/passwd
echo "nogroup:x:65534:" >>/etc/group
out=$(su -s /bin/sh nobody -c "id -u; echo evil > $A" 2>&1)
result nonroot "$(echo "$out" | tr '\n' ' ')"
result after_nonroot "$(cat "$A")"

# Limits: 255 characters with and without the newline.
alias_mark max
max=$(printf '%0255d' 0 | tr 0 m)
echo "$max" >"$A" || fail "255-character alias with newline"
result max_len "$(cat "$A" | wc -c)"
printf '%s' "$max" >"$A" || fail "255-character alias without newline"
ev_phase max
alias_mark max-sd
echo "write through" >"$ct" || fail "cache_type write through (max)"
echo "write back" >"$ct" || fail "cache_type write back (max)"
echo $((2 << 24)) >/proc/sys/dev/scsi/logging_level
dd if="/dev/$disk" of=/dev/null bs=4k count=1 iflag=direct 2>/dev/null ||
	fail "direct read (max)"
echo 0 >/proc/sys/dev/scsi/logging_level
alias_mark max-sd-done

# Replace, then a synthetic uevent of a partition carries the alias too.
alias_mark replace
printf 'bar' >"$A" || fail "writing bar without newline"
result read_bar "$(cat "$A")"
ev_phase replace
echo change >"/sys/block/$disk/${disk}1/uevent"
ev_phase synthetic

# Clear, and clear again.
alias_mark clear
echo >"$A" || fail "clearing"
result cleared_bytes "$(wc -c <"$A")"
ev_phase clear
echo >"$A" || fail "clearing again"
ev_phase clear2
alias_mark cleared-sd
echo "write through" >"$ct" || fail "cache_type write through (cleared)"
echo "write back" >"$ct" || fail "cache_type write back (cleared)"

# The kernel names stay: /proc/partitions, device nodes, sysfs.
alias_mark names
echo baz >"$A" || fail "writing baz"
ev_phase baz
result proc_partitions "$(awk 'NR > 2 { print $4 }' /proc/partitions | tr '\n' ' ')"
result dev_nodes "$(ls /dev | grep "^$disk" | tr '\n' ' ')"
result sys_block "$(ls /sys/block | grep "^sd" | tr '\n' ' ')"
result sys_class_block "$(ls /sys/class/block | grep "^$disk" | tr '\n' ' ')"
result uevent_file "$(grep -E '^(DEVNAME|ALIAS)=' "/sys/block/$disk/${disk}2/uevent" | tr '\n' ' ')"

# Re-reading the partition table removes and adds the partitions again:
# their add events carry the alias.
alias_mark rereadpt
blockdev --rereadpt "/dev/$disk" || fail "blockdev --rereadpt"
ev_phase rereadpt

# Names close to kernel names but not of their form are accepted.
alias_mark accept
for n in Sdb sdb_data hdd01 db01 md-data nvme-slot1 disk-sdb loop ramdisk; do
	echo "$n" >"$A" || fail "writing $n"
	result accepted "$n $(cat "$A")"
done
ev_stop
result done
