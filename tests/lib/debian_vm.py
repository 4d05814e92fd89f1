# SPDX-License-Identifier: GPL-2.0
"""The Debian 12 machine of qemu/debian-vm.sh, booted under QEMU.

It boots Debian's own kernel and initramfs from the image, with systemd as
PID 1, on a copy-on-write view of the cached disk image (``snapshot=on``),
its NIC on a tap of the test's namespace.  The probe script (fw_cfg
``opt/netoops/probe``, run by the image's nto-probe.service) reports on the
result port as a guest script does, so :class:`harness.GuestResult` reads it.
"""

from __future__ import annotations

from pathlib import Path

from harness import Guest, Netns, cache_dir

PROBE = Path(__file__).resolve().parents[1] / "debian" / "probe.sh"


def image_dir() -> Path:
    return cache_dir() / "debvm" / "current"


class DebianMachine(Guest):
    def __init__(self, ns: Netns, *, probe: Path = PROBE, timeout: float = 360,
                 allow=(), nic: str = "virtio", smp: int = 2):
        super().__init__(ns, "debian", timeout=timeout, allow=allow, nic=nic,
                         smp=smp, memory="1G")
        self.probe = probe

    def argv(self) -> list[str]:
        img = image_dir()
        for f in ("vmlinuz", "initrd.img", "disk.raw"):
            if not (img / f).exists():
                raise FileNotFoundError(f"{img / f} missing: run `make debvm` first")
        params = ["root=/dev/vda", "rw", "console=ttyS0", "panic=1",
                  "idle=halt", "systemd.show_status=1"]
        # fixed PCI slots: the NIC is enp0s3 to Debian's udev
        return self.qemu_argv(img / "vmlinuz", img / "initrd.img", params, nic_addr="0x3") + [
            "-drive", f"file={img / 'disk.raw'},if=none,id=d0,format=raw,snapshot=on",
            "-device", "virtio-blk-pci,drive=d0,addr=0x4",
            "-fw_cfg", f"name=opt/netoops/probe,file={self.probe}"]
