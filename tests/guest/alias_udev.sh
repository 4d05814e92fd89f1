# SPDX-License-Identifier: GPL-2.0
# The example rule (udev/61-disk-alias.rules) run by Debian's systemd-udevd,
# standalone, on two virtio-scsi disks: NTO-UDEV-0 (two partitions), which
# the rule names, and NTO-UDEV-1, which it does not.
#   coldplug  udevd + `udevadm trigger --action=add`: the rule sets the
#             alias from ID_SERIAL, /dev/disk/by-alias/<alias>[-partN] exist
#   hand      on the other disk, links follow a rename and a clear by hand
#   revert    an alias set by hand on the named disk is put back (no loop)
#   edited    an edited rule, reloaded and triggered, renames the disk
. /tests/lib.sh
. /tests/alias_lib.sh

RULE=/etc/udev/rules.d/61-disk-alias.rules
settle() { udevadm settle --timeout=60 || fail "udevadm settle timed out"; }
links() { # the by-alias links and their targets, sorted
	for l in /dev/disk/by-alias/*; do
		[ -L "$l" ] && echo "${l##*/}>$(basename "$(readlink "$l")")"
	done | sort | tr '\n' ' '
}
serial_of() { # ID_SERIAL as 60-persistent-storage.rules gets it
	/lib/udev/scsi_id --export --whitelisted -d "/dev/$1" |
		sed -n 's/^ID_SERIAL=//p'
}
disk_with_serial() {
	for d in /sys/block/sd*; do
		case $(serial_of "${d##*/}") in
		*"$1") echo "${d##*/}"; return ;;
		esac
	done
}

# The example rule, with the serial of the first disk in place of its first
# one, installed before udevd starts as on a real system.
d0=$(disk_with_serial NTO-UDEV-0)
d1=$(disk_with_serial NTO-UDEV-1)
[ -n "$d0" ] && [ -n "$d1" ] || fail "disks by serial: '$d0' '$d1'"
serial=$(serial_of "$d0")
result serial "$serial"
sed "s/0QEMU_QEMU_HARDDISK_drive-scsi0-0-0-0/$serial/" \
	/usr/share/netoops/61-disk-alias.rules >"$RULE"
grep -q "$serial" "$RULE" || fail "rule not edited"

alias_mark coldplug
mkdir -p /run/udev
/lib/systemd/systemd-udevd --daemon --resolve-names=never ||
	fail "systemd-udevd did not start"
# The disks are probed already: trigger "add" as a booting system does.
udevadm trigger --action=add --subsystem-match=block
settle
result disks "$d0 $d1"
result coldplug_alias "$(cat /sys/block/$d0/alias_name)"
result coldplug_other "$(wc -c </sys/block/$d1/alias_name)"
result coldplug_links "$(links)"

alias_mark hand
echo spare_1 >/sys/block/$d1/alias_name
settle
result hand_set "$(links)"
echo spare_2 >/sys/block/$d1/alias_name
settle
result hand_rename "$(links)"
echo >/sys/block/$d1/alias_name
settle
result hand_clear "$(links)"

alias_mark revert
echo handset >/sys/block/$d0/alias_name
settle
sleep 1
settle
result revert_alias "$(cat /sys/block/$d0/alias_name)"
result revert_links "$(links)"

alias_mark edited
sed -i 's/ATTR{alias_name}="db_data0"/ATTR{alias_name}="edited_0"/' "$RULE"
udevadm control --reload
udevadm trigger --subsystem-match=block --sysname-match="$d0"
settle
result edited_alias "$(cat /sys/block/$d0/alias_name)"
result edited_links "$(links)"
alias_mark done
udevadm control --exit
result done
