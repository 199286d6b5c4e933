#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Boots a fresh test guest and runs one command in it.
#
#   run.sh [--shell] [--timeout SECONDS] [--kmemleak] [--out DIR]
#          [--append KERNEL-PARAMS] [--backend-args ARGS] [--num-queues N]
#          [--peer PEER-CMD] [--suite FILE] [--reboot] [--personality id42|net]
#          [--own-cpus] [--peer-rdma rxe] [--hosts 2] [--mtu BYTES]
#          [--devices N] [--] CMD...
#
# The guest is the project's kernel under the project's QEMU (TCG unless a
# real KVM module is loaded), its root is the build sysroot over virtio-9p,
# the checkout is at /opt ($VRDMA_SRC) and the command runs there,
# it has a virtio-net interface (eth0, 10.0.2.15/24) and the virtio-rdma
# device (ID 42), served by the vhost-user backend started here. Exits with
# the command's status; a guest that does not finish within the timeout is
# killed. Everything runs in a private mount+PID namespace, so no process,
# mount or socket outlives the run. --out DIR receives the run's files
# (status, backend.log, and whatever the command wrote to /mnt/run).
# --backend-args passes extra options to the backend (split on spaces), e.g.
# "--config-override phys_port_cnt=2" to present a device with a bad config.
# With "--net" among them the device is the net personality (virtio-net with
# RoCE, QEMU's net=on) and the guest has no QEMU NIC: its eth0 is that
# function, served by the backend (a peer guest's too).
# --personality picks the device a guest gets: id42 (the default, the
# virtio-rdma device beside a QEMU NIC) or net (the same as --backend-args
# "--net --rings": one virtio-net function with VIRTIO_NET_F_ROCE, whose
# RoCE half virtio_rdma binds through virtio_net's auxiliary device).
# --num-queues gives QEMU a queue count other than the backend's (by default
# QEMU asks the backend), to test QEMU's check.
# The guest sees the run's files at /mnt/run (backend.log among them).
# --peer boots a second guest beside it that runs PEER-CMD: the same backend
# process serves both devices, the two NICs share a link of their own (the
# main guest is 10.0.2.15, the peer 10.0.2.16, no slirp), and the run fails
# if either guest fails. The peer's files (console.log, status) are in peer/.
# --peer-rdma rxe makes the peer a host with Linux's rxe instead: it has no
# virtio-rdma device, only QEMU's virtio-net on a TAP, where its tests add
# rxe0 (rdma link add rxe0 type rxe netdev eth0). The main guest's device
# needs the backend's --rings; its uplink (the backend's --uplink) is a
# TAP on the same bridge, in a network namespace of the run's own: one L2,
# as two hosts on a switch, RoCEv2 frames and all. An ID-42 guest's NIC is
# then the backend's too (its --nic-socket, QEMU's virtio-net-pci on
# -netdev vhost-user): its RDMA port and its Ethernet are one port.
# --hosts 2 (with --peer) puts the peer on another host the same way, with
# a virtio-rdma device of its own: a second backend process serves it, its
# uplink a TAP on the same bridge, so the two devices meet only on the wire.
# The test's backend kill and restart reach the main guest's backend.
# --mtu BYTES sets every guest's Ethernet MTU (jumbo frames, e.g. 9000):
# the backends' --mtu (the net personality's virtio-net MTU and the RDMA
# port's IB MTU), host_mtu of QEMU's NICs, and the run's bridge and TAPs,
# as an operator sets a jumbo network. (A lone ID-42 guest's NIC is on
# QEMU's user network, whose side stays at 1500.)
# --devices N gives the (lone) guest N ID-42 devices of its backend
# instead of one, the first paired with its NIC; the backend's per-device
# options (--socket-max-qp, --config-override DEVICE:FIELD=VALUE, ...) in
# --backend-args, given once per device, tell them apart.
# --suite FILE runs the test scripts FILE lists (one path a line, relative
# to the checkout) one after the other in this one guest instead of CMD,
# each with its own verdict in results/NAME/ (see init.sh); the run's own
# status then only says whether the guest got through the list.
# --reboot lets the main guest reboot: CMD exits with 99 to reboot at once
# and runs again in the new boot with VRDMA_BOOT counting boots (init.sh).
# --own-cpus makes each guest a tenant with CPUs of its own, as on a cloud
# host: the host's CPUs split evenly among the guests, each QEMU and its
# device's backend threads (--cpus) pinned to its share.
# KERNEL=release in the environment boots the release kernel (no checkers)
# instead of the debug one.
source "$(dirname "$0")/../../build/lib.sh"

mode=run timeout=${VRDMA_TIMEOUT:-600} kmemleak=0 out="" append="" backend_args="" num_queues=""
peer_cmd="" suite="" reboot=0 personality_args="" own_cpus=0 peer_rdma=virtio hosts2=0 mtu="" devices=1
while [ $# -gt 0 ]; do
	case "$1" in
	--shell) mode=shell ;;
	--timeout) timeout=$2; shift ;;
	--kmemleak) kmemleak=1 ;;
	--out) out=$2; shift ;;
	--append) append=$2; shift ;;
	--backend-args) backend_args=$2; shift ;;
	--num-queues) num_queues=$2; shift ;;
	--peer) peer_cmd=$2; shift ;;
	--suite) suite=$2; shift ;;
	--reboot) reboot=1 ;;
	--own-cpus) own_cpus=1 ;;
	--peer-rdma)
		case "$2" in
		rxe | virtio) peer_rdma=$2 ;;
		*) die "--peer-rdma: rxe or virtio, not '$2'" ;;
		esac
		shift
		;;
	--hosts)
		case "$2" in
		1) ;;
		2) hosts2=1 ;;
		*) die "--hosts: 1 or 2, not '$2'" ;;
		esac
		shift
		;;
	--mtu)
		[[ $2 =~ ^[0-9]+$ ]] && [ "$2" -ge 1280 ] && [ "$2" -le 9000 ] ||
			die "--mtu: 1280..9000 bytes (the backend's range), not '$2'"
		mtu=$2
		shift
		;;
	--devices)
		[[ $2 =~ ^[1-8]$ ]] || die "--devices: 1..8, not '$2'"
		devices=$2
		shift
		;;
	--personality)
		case "$2" in
		id42) ;;
		net) personality_args="--net --rings" ;;
		*) die "--personality: id42 or net, not '$2'" ;;
		esac
		shift
		;;
	--) shift; break ;;
	-*) die "unknown option $1" ;;
	*) break ;;
	esac
	shift
done
backend_args="$backend_args${personality_args:+ $personality_args}${mtu:+ --mtu $mtu}"
if [ $hosts2 = 1 ]; then
	[ $peer_rdma = virtio ] || die "--hosts 2 gives the peer virtio-rdma, not --peer-rdma $peer_rdma"
	peer_rdma=remote
fi
if [ $peer_rdma != virtio ]; then
	[ -n "$peer_cmd" ] || die "--peer-rdma rxe and --hosts 2 need --peer"
	[[ " $backend_args " == *" --rings "* ]] || die "--peer-rdma rxe and --hosts 2 need --rings (the wire serves ring QPs)"
fi
if [ "$devices" != 1 ]; then
	[ -z "$peer_cmd" ] || die "--devices is for a lone guest, not with --peer"
	[[ " $backend_args " != *" --net "* ]] || die "--devices gives ID-42 devices, not with --net"
fi
[ $mode = shell ] || [ $# -gt 0 ] || [ -n "$suite" ] || die "no command given (or use --shell or --suite)"

kdir=$(kernel_dir) qemu=$(qemu_bin) backend=$(backend_bin) provider=$(provider_lib)
[ -f "$kdir/build/arch/x86/boot/bzImage" ] || die "no kernel at $kdir: run 'make build'"
[ -x "$qemu" ] || die "no QEMU at $qemu: run 'make build'"
[ -x "$backend" ] || die "no backend at $backend: run 'make build'"
[ -f "$provider" ] || die "no rdma-core provider at $provider: run 'make build'"

share=$(mktemp -d /tmp/vrdma-run.XXXXXX)
trap 'rm -rf "$share"' EXIT
printf '%s\n' "$*" >"$share/cmd"
if [ -n "$suite" ]; then
	[ $mode = run ] && [ -z "$peer_cmd" ] || die "--suite runs in one guest, without --shell or --peer"
	cp "$suite" "$share/suite"
fi
# provider_share DIR: the guest's libibverbs loads the project's provider
# from DIR (its /mnt/run): DIR/libibverbs.d, which the guest mounts over
# /etc/libibverbs.d, lists ours and Debian's rxe: the only devices a guest
# has. libibverbs loads every provider listed (RTLD_NOW) in each process;
# all 18 of Debian's cost a debug guest 2.6 s per process under TCG, the
# two 0.6 s.
provider_share() {
	mkdir -p "$1/provider" "$1/libibverbs.d"
	cp "$provider" "$1/provider/"
	cp "$(sysroot_dir)"/etc/libibverbs.d/rxe.driver "$1/libibverbs.d/"
	echo "driver /mnt/run/provider/libvirtio_rdma" >"$1/libibverbs.d/virtio_rdma.driver"
}
provider_share "$share"
# The e2e tests' C programs, built on the host (at /mnt/run/bin).
cp -r "$("$BUILD/e2e-programs.sh")" "$share/bin" || die "cannot build the e2e tests' programs"
peer=0
if [ -n "$peer_cmd" ]; then
	[ $mode = run ] || die "--peer needs a command in the main guest, not --shell"
	peer=1
	provider_share "$share/peer"
	printf '%s\n' "$peer_cmd" >"$share/peer/cmd"
fi

rc=0
# The checkout is also bound at /opt: the guest mounts a tmpfs over /tmp,
# where a checkout may live, so guest-side paths use /opt.
in_sysroot --binds "$kdir/modules/lib/modules:/usr/lib/modules $share:$share $TOP:/opt" \
	"$TOP/tools/testing/vm/guest.sh" "$mode" "$timeout" "$kmemleak" "$share" \
	"$kdir/build/arch/x86/boot/bzImage" "$qemu" "$backend" "$append" "$backend_args" \
	"$num_queues" "$peer" "$reboot" "$own_cpus" "$peer_rdma" "$mtu" "$devices" || rc=$?
if [ -n "$out" ]; then
	mkdir -p "$out"
	cp -r "$share"/. "$out"/
fi
exit $rc
