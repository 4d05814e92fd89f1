# SPDX-License-Identifier: GPL-2.0
# Change the alias in a loop while other loops provoke sd and SCSI messages
# (direct reads with SCSI logging on, so scmd_printk, scsi_print_result and
# scsi_print_command run at every completion; cache type changes for
# sd_printk; refused mode selects for sense printing) and read the attribute.
# Every name seen in a message prefix or read back must be one that was
# written (or the kernel name, while the alias is cleared), and messages
# with the longest alias must keep their text.  The console only shows
# warnings and worse meanwhile, so the host still sees any splat.
. /tests/lib.sh
. /tests/alias_lib.sh

disk=$(alias_disk)
A=/sys/block/$disk/alias_name
ct=$(echo /sys/block/$disk/device/scsi_disk/*/cache_type)
secs=$(arg secs 20)

long=$(printf '%0100d' 0 | tr 0 L)
max=$(printf '%0255d' 0 | tr 0 M)
names="a bb_bb ccc-ccc-ccc $long dddd $max e-e"
for n in $names; do echo "$n"; done >/tmp/names

dmesg -c >/dev/null
echo 5 >/proc/sys/kernel/printk
# MLCOMPLETE 2: result and CDB of every command; HLQUEUE 3 and HLCOMPLETE 2:
# sd's scmd_printk when it sets a read up and in sd_done.
echo $(((2 << 12) | (3 << 21) | (2 << 24))) >/proc/sys/dev/scsi/logging_level
touch /tmp/run

(
	n=0
	end=$(($(date +%s) + secs))
	while [ "$(date +%s)" -lt "$end" ]; do
		for x in $names; do
			echo "$x" >"$A" || echo "write $x failed" >>/tmp/errors
			n=$((n + 1))
		done
		echo >"$A" || echo "clear failed" >>/tmp/errors
		n=$((n + 1))
	done
	echo "$n" >/tmp/writes
	rm -f /tmp/run
) &
(
	# read is a shell builtin: many more reads than with cat
	while [ -e /tmp/run ]; do
		read -r x <"$A"
		echo "$x"
	done >/tmp/reads
) &
(
	while [ -e /tmp/run ]; do
		dd if="/dev/$disk" of=/dev/null bs=4k count=8 iflag=direct \
			2>/dev/null || echo "read failed" >>/tmp/errors
	done
) &
(
	while [ -e /tmp/run ]; do
		echo "write through" >"$ct"
		echo "write back" >"$ct"
		echo none >"$ct" 2>/dev/null
	done
) &
wait

echo 0 >/proc/sys/dev/scsi/logging_level
echo 7 >/proc/sys/kernel/printk
alias_mark race-done

result writes "$(cat /tmp/writes)"
result reads "$(grep -c '' /tmp/reads)"
result errors "$(cat /tmp/errors 2>/dev/null | sort | uniq -c | tr '\n' ' ')"
echo "$disk" >>/tmp/names
# A read is a written name or empty (cleared); empty lines are not counted.
result bad_reads "$(grep -v -x -F -f /tmp/names /tmp/reads | grep -c .)"

dmesg >/tmp/klog
sd_names >/tmp/seen
result sd_msgs "$(grep -c '' /tmp/seen)"
result torn "$(sort -u /tmp/seen | grep -v -x -F -f /tmp/names | head -c 600 | tr '\n' ' ')"
i=0
for n in $names $disk; do
	result seen "$i $(grep -c -x -F "$n" /tmp/seen)"
	i=$((i + 1))
done
# The longest alias does not push the text out of the message.
result max_sd_done "$(grep -c -F "[$max] tag#" /tmp/klog)"
result max_sd_done_text "$(grep -F "[$max] tag#" /tmp/klog | grep -c 'sd_done: completed [0-9]* of [0-9]* bytes$')"
result max_result_text "$(grep -F "[$max] tag#" /tmp/klog | grep -c 'Done: SUCCESS Result: hostbyte=DID_OK driverbyte=DRIVER_OK cmd_age=')"
result max_cdb_text "$(grep -F "[$max] tag#" /tmp/klog | grep -c 'CDB: Read(10) 28 00')"
result max_no_text "$(grep -c -E "\[$max\] (tag#[0-9]+ )?$" /tmp/klog)"
result max_sd_printk "$(grep -c -F "[$max] Write cache:" /tmp/klog)"
result max_sense "$(grep -c -F "[$max] Sense Key : Illegal Request" /tmp/klog)"
result log_lost "$(grep -c 'printk messages dropped' /tmp/klog)"
result done
