#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# A real Debian 12 machine for the deployment tests:
#   qemu/debian-vm.sh CACHE DEBDIR
#
# 1. Base (CACHE/debvm/base-<key>.tar, keyed on the package list and the two
#    kernel ABIs): mmdebstrap from the machine's own Debian apt sources:
#    systemd as PID 1, udev, ifupdown, dkms, Debian's linux-image and
#    linux-headers of the older ABI, and the packages of the newer ABI
#    downloaded (not installed) for the upgrade step.
# 2. Image (CACHE/debvm/img-<key>/, keyed on the base, the .debs in DEBDIR
#    and this script): in a chroot of the base (its own mount namespace,
#    nothing of it is loaded on this machine):
#    - a fleet signing key in /etc/dkms/framework.conf (mok_signing_key,
#      mok_certificate), as the README tells a fleet to do;
#    - `apt-get install ./netoops-dkms_*.deb ./netoops-collector_*.deb`: the
#      package's real postinst; DKMS builds the modules for the installed
#      kernel;
#    - the kernel upgrade: `apt-get install linux-image-amd64
#      linux-headers-amd64`, whose postinst hooks have DKMS build the
#      modules for the new ABI;
#    - what an administrator does: a static address in
#      /etc/network/interfaces, the targets in /etc/default/netoops;
#    - the test rig: a unit that runs the script QEMU hands over as fw_cfg
#      "opt/netoops/probe" once the machine is up (the tests' eyes; it loads
#      nothing);
#    - an ext4 image (mkfs.ext4 -d) and the new kernel's vmlinuz and initrd.
#
# The ABIs: OLD is the one the oldest linux-image-amd64 in the apt sources
# depends on (bookworm's point release), NEW the one of the newest
# (bookworm-security): the machine is installed at the point release, gets
# netoops, then `apt-get install linux-image-amd64 linux-headers-amd64`
# moves both meta packages to NEW, as an upgrade does.  With only one
# version in the sources the upgrade step is `dkms autoinstall` for it.
set -euo pipefail

mkdir -p "$1"
cache=$(cd "$1" && pwd -P)
debdir=$(cd "$2" && pwd -P)
die() { echo "debian-vm.sh: $*" >&2; exit 1; }
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH
export LC_ALL=C.UTF-8

command -v mmdebstrap >/dev/null || die "mmdebstrap missing: run make deps"
dkms_deb=$(ls "$debdir"/netoops-dkms_*_all.deb 2>/dev/null | tail -1)
coll_deb=$(ls "$debdir"/netoops-collector_*_amd64.deb 2>/dev/null | tail -1)
[ -n "$dkms_deb" ] && [ -n "$coll_deb" ] || die "no netoops .debs in $debdir: run make deb"

# The ABI a version of the linux-image-amd64 meta package depends on
abi_of() {
	apt-cache show "linux-image-amd64=$1" 2>/dev/null |
		sed -n 's/^Depends: linux-image-\(6\.1\.0-[0-9]*\)-amd64 .*/\1/p' | head -1
}
metas=$(apt-cache madison linux-image-amd64 | awk '{ print $3 }' | sort -uV)
old_meta=$(echo "$metas" | head -1)
new_meta=$(echo "$metas" | tail -1)
[ -n "$new_meta" ] || die "no linux-image-amd64 in the apt sources (apt-get update?)"
old=$(abi_of "$old_meta")
new=$(abi_of "$new_meta")
[ -n "$old" ] && [ -n "$new" ] || die "no ABI for linux-image-amd64 $old_meta/$new_meta"

# The machine's Debian sources (not third-party ones), one-line style
sources() {
	/usr/bin/python3 - <<'EOF'
import glob, re
suites = {"bookworm", "bookworm-updates", "bookworm-security"}
out = []
for f in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
    try:
        for line in open(f):
            m = re.match(r"deb\s+(\[[^]]*\]\s+)?(\S+)\s+(\S+)\s+(.*)", line.strip())
            if m and m.group(3) in suites:
                out.append(f"deb {m.group(2)} {m.group(3)} {m.group(4)}")
    except OSError:
        pass
for f in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for stanza in open(f).read().split("\n\n"):
        fields = dict(re.findall(r"^(\S+):\s*(.*)$", stanza, re.M))
        if "deb" not in fields.get("Types", "").split():
            continue
        for uri in fields.get("URIs", "").split():
            for suite in fields.get("Suites", "").split():
                if suite in suites:
                    out.append(f"deb {uri} {suite} {fields.get('Components', 'main')}")
print("\n".join(dict.fromkeys(out)))
EOF
}
src=$(sources)
[ -n "$src" ] || die "no Debian bookworm entries in /etc/apt/sources.list*"

pkgs=(systemd-sysv udev kmod iproute2 ifupdown procps dkms openssl mokutil
      initramfs-tools zstd python3 "linux-image-amd64=$old_meta"
      "linux-headers-amd64=$old_meta")
work=$cache/debvm
mkdir -p "$work"
exec 9>"$work/.lock"
flock 9

# 1. Base
base_key=$( (echo "$src"; echo "${pkgs[*]}"; echo "$new";
	sed -n '/^# BASE-BEGIN/,/^# BASE-END/p' "$0") | sha256sum | cut -c1-16)
base=$work/base-$base_key.tar
if [ ! -f "$base" ]; then
	echo "debian-vm.sh: mmdebstrap (kernels $old, upgrade to $new)"
	rm -f "$work"/base-*.tar
# BASE-BEGIN
	echo "$src" | mmdebstrap --variant=minbase --quiet \
		--include="$(IFS=,; echo "${pkgs[*]}")" \
		--skip=cleanup/apt \
		--customize-hook='chroot "$1" apt-get install -y -qq --download-only linux-image-amd64 linux-headers-amd64 >/dev/null' \
		bookworm "${base%.tar}.part.tar" - || die "mmdebstrap failed"
# BASE-END
	mv "${base%.tar}.part.tar" "$base"
fi

# 2. Image
# what the packages install and do (not their documentation or man pages: a
# README edit must not cost an image build)
deb_key() {
	dpkg-deb -f "$1" | grep -v '^Installed-Size:'
	for f in postinst prerm postrm conffiles md5sums; do
		dpkg-deb -I "$1" "$f" 2>/dev/null | grep -v ' usr/share/\(doc\|man\)/' || true
	done
}
img_key=$( (echo "$base_key"; deb_key "$dkms_deb"; deb_key "$coll_deb";
	cat "$0") | sha256sum | cut -c1-16)
img=$work/img-$img_key
if [ -f "$img/.done" ]; then
	ln -sfn "img-$img_key" "$work/current"
	exit 0
fi
echo "debian-vm.sh: building the image (apt install of the packages, DKMS, a kernel upgrade)"
find "$work" -maxdepth 1 -name 'img-*' ! -name "img-$img_key" -exec rm -rf {} +
rm -rf "$img"
mkdir -p "$img/root"
root=$img/root
start=$(date +%s)
tar -xpf "$base" -C "$root"
cp "$dkms_deb" "$coll_deb" "$root/tmp/"

cat >"$root/tmp/setup.sh" <<EOF
#!/bin/bash
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
exec </dev/null
echo netoops-vm >/etc/hostname
printf '/dev/vda / ext4 defaults 0 1\n' >/etc/fstab
passwd -d root >/dev/null

# A fleet-wide module signing key, as in the README (made here for the test)
mkdir -p /etc/dkms/fleet
openssl req -new -x509 -newkey rsa:2048 -nodes -days 3650 -outform DER \\
	-subj "/CN=netoops test fleet signing key/" \\
	-keyout /etc/dkms/fleet/mok.key -out /etc/dkms/fleet/mok.der 2>/dev/null
cat >>/etc/dkms/framework.conf <<'CONF'
mok_signing_key="/etc/dkms/fleet/mok.key"
mok_certificate="/etc/dkms/fleet/mok.der"
CONF

echo "== apt-get install ./$(basename "$dkms_deb") ./$(basename "$coll_deb")"
apt-get install -y --no-install-recommends /tmp/$(basename "$dkms_deb") \\
	/tmp/$(basename "$coll_deb")
echo "== kernel upgrade: linux-image-amd64 ($old -> $new)"
if [ "$old" = "$new" ]; then
	dkms autoinstall -k $new-amd64
else
	apt-get install -y --no-install-recommends linux-image-amd64 linux-headers-amd64
fi
echo "== dkms status"
dkms status

# What the administrator writes: the address, the targets
cat >/etc/network/interfaces.d/netoops-test <<'NET'
auto enp0s3
iface enp0s3 inet static
	address 192.0.2.2/24
NET
sed -i 's/^NETOOPS_TARGETS=.*/NETOOPS_TARGETS="@192.0.2.2\/enp0s3,2004@192.0.2.1\/02:6e:74:6f:00:01"/;
	s/^NETOOPS_BLOB=.*/NETOOPS_BLOB="host=%h rack=7 row=b role=test"/' /etc/default/netoops
sed -i 's|^#metrics-textfile = .*|metrics-textfile = "/var/lib/netoops/netoops.prom"|' \
	/etc/netoops/collector.toml

# The test rig: run the probe QEMU hands over, once the machine is up
cat >/etc/systemd/system/nto-probe.service <<'UNIT'
[Unit]
Description=netoops test rig: the probe script from QEMU fw_cfg
After=multi-user.target
[Service]
# simple, not oneshot: the probe waits for the boot to finish, which a
# oneshot unit still starting would hold up for ever
Type=simple
ExecStartPre=/sbin/modprobe qemu_fw_cfg
ExecStart=/bin/sh -c 'exec sh /sys/firmware/qemu_fw_cfg/by_name/opt/netoops/probe/raw'
StandardOutput=journal+console
[Install]
WantedBy=multi-user.target
UNIT
systemctl enable nto-probe.service
rm -f /tmp/*.deb /tmp/setup.sh
apt-get clean
EOF
chmod +x "$root/tmp/setup.sh"
log=$img/setup.log
if ! unshare -m --propagation private bash -c '
	r=$1
	mount -t proc proc "$r/proc"
	mount -t sysfs sys "$r/sys"
	mount --rbind /dev "$r/dev"
	mount -t tmpfs tmpfs "$r/run"
	cp /etc/resolv.conf "$r/etc/resolv.conf"
	chroot "$r" /tmp/setup.sh' _ "$root" >"$log" 2>&1; then
	tail -40 "$log"
	die "setting up the image failed: $log"
fi

# the kernels and initrds, and an ext4 image of the root
cp "$root/boot/vmlinuz-$new-amd64" "$img/vmlinuz"
cp "$root/boot/initrd.img-$new-amd64" "$img/initrd.img"
echo "$new-amd64" >"$img/release"
echo "$old-amd64" >"$img/old-release"
size=$(( $(du -sm "$root" | cut -f1) * 5 / 4 + 256 ))
mkfs.ext4 -q -F -L netoops-root -d "$root" "$img/disk.raw" "${size}M"
rm -rf "$root"
echo "$(( $(date +%s) - start ))" >"$img/build-seconds"
touch "$img/.done"
ln -sfn "img-$img_key" "$work/current"
echo "debian-vm.sh: $img ($(cat "$img/build-seconds") s)"
