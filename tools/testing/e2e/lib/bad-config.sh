# SPDX-License-Identifier: GPL-2.0
# Shared by the bad-config-*.sh tests (sourced, not run on its own).

# expect_probe_failure MESSAGE: loading the driver leaves the virtio-rdma
# device unbound, logs MESSAGE (a grep pattern), registers no RDMA device,
# and the module unloads cleanly.
expect_probe_failure() {
	local dev="" d
	for d in /sys/bus/virtio/devices/*; do
		[ "$(cat "$d/device")" = 0x002a ] && dev=$d
	done
	[ -n "$dev" ] || { echo "FAIL: no virtio device with ID 0x002a"; exit 1; }

	modprobe virtio_rdma
	dmesg | grep "virtio_rdma" | sed 's/^\[[^]]*\] //'
	if [ -e "$dev/driver" ]; then
		echo "FAIL: the device was bound despite its config"; exit 1
	fi
	if ! dmesg | grep "virtio_rdma .*$1" >/dev/null; then
		echo "FAIL: no '$1' in the kernel log"; exit 1
	fi
	if [ -n "$(ls /sys/class/infiniband/ 2>/dev/null)" ]; then
		echo "FAIL: an RDMA device was registered: $(ls /sys/class/infiniband/)"; exit 1
	fi
	rmmod virtio_rdma
	echo "probe refused the device: ok"
}
