# SPDX-License-Identifier: GPL-2.0
# kdump beside netoops: a capture kernel (the same bzImage, a small
# initramfs) loaded with Debian's kexec, crash_kexec_post_notifiers on the
# command line, then sysrq c.  The netoops dump goes out first (the kmsg
# dump comes before the capture kernel with crash_kexec_post_notifiers),
# then the capture kernel boots and runs /tests/kdump_capture.sh.
. /tests/lib.sh
. /tests/netoops_lib.sh
netoops_load
netoops_setid
[ "$(cat /sys/kernel/kexec_crash_size)" -gt 0 ] ||
	fail "no memory reserved for a capture kernel (crashkernel=)"
kexec -p /boot/bzImage --initrd=/boot/capture.cpio \
	--append="console=ttyS0 panic=1 loglevel=7 idle=halt nr_cpus=1 irqpoll reset_devices nto.test=kdump_capture" ||
	fail "kexec -p"
[ "$(cat /sys/kernel/kexec_crash_loaded)" = 1 ] || fail "capture kernel not loaded"
result loaded
echo c >/proc/sysrq-trigger
fail "the panic returned"
