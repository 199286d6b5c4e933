# SPDX-License-Identifier: GPL-2.0
#
# virtio-rdma: a Rust-for-Linux driver for the virtio RDMA device, the
# vhost-user device backend and the QEMU front end that present it, and the
# harness that runs them together. See README.md.
#
#   make setup            everything a fresh machine needs (cached)
#   make check            every test layer; ends with "N passed, N failed"
#   make check TEST='...' only the named layers (style cargo kunit runner
#                         e2e) or e2e tests (e.g. TEST=lossy-link)
#   make run CMD='...'    run a command in a fresh guest, exit with its status
#                         (KERNEL=release: the release kernel)
#   make run              the demonstration
#   make shell            an interactive guest
#   make build            kernel + modules, QEMU, the backend and the rdma-core
#                         provider (incremental)
#   make bench            the backend's benchmarks, perftest on virtio_rdma0 beside
#                         rxe (2 B .. 1 MiB), and NVMe-oF over virtio_rdma0 beside
#                         NVMe/TCP, each in one guest and then between two guests,
#                         perftest between two guests of the net personality
#                         (virtio_rdma0 and rxe on one virtio-net function),
#                         perftest and NVMe-oF between two hosts (virtio_rdma0
#                         and rxe0 over one link; MTU 1500 and 9000), and a guest's bandwidth beside
#                         another guest's flood, on the release kernel; tables
#                         (CSV, Markdown) and plots (PNG) in BENCH_OUT (default
#                         bench-results/); BENCH_ONLY=REGEX runs the stages it
#                         names (tools/testing/bench/all.sh); never fails on a
#                         number
#
# Caches live in $(VRDMA_CACHE) (default /var/cache/virtio-rdma), keyed by
# their inputs. JOBS sets build parallelism (default 3). KERNEL picks the
# guest kernel, debug (default: lockdep, KASAN, kmemleak) or release; make
# check always tests the debug one and make bench measures the release one.

SHELL := /bin/bash
B := tools/build
KERNEL ?= debug
export KERNEL TEST

.PHONY: setup deps sysroot qemu kernel backend provider build run shell check demo bench

setup: deps build

# The host's own tools: debootstrap and unshare build the sysroot; gnuplot
# and python3 draw make bench's plots.
deps:
	@command -v debootstrap >/dev/null && command -v unshare >/dev/null && \
		command -v gnuplot >/dev/null && command -v python3 >/dev/null || \
		{ apt-get update -qq && \
		  apt-get install -y -qq debootstrap util-linux gnuplot-nox python3; }

sysroot: deps
	@$(B)/sysroot.sh --summary >/dev/null

qemu: sysroot
	@$(B)/qemu.sh >/dev/null

kernel: sysroot
	@$(B)/kernel.sh >/dev/null
	@$(B)/testmods.sh

backend: sysroot
	@$(B)/backend.sh >/dev/null

provider: sysroot
	@$(B)/provider.sh >/dev/null

build: qemu kernel backend provider

CMD ?=
run: build
	@if [ -z "$(CMD)" ]; then tools/testing/vm/run.sh -- bash tools/testing/demo.sh; \
	else tools/testing/vm/run.sh -- '$(subst ','"'"',$(CMD))'; fi

shell: build
	@tools/testing/vm/run.sh --shell

# make check's budget counts from here, so that the builds count too.
check: override KERNEL := debug
check: export VRDMA_CHECK_T0 := $(shell date +%s)
check: build
	@$(B)/kernel.sh >/dev/null && $(B)/testmods.sh # this kernel, whatever build made
	@tools/testing/check.sh

bench: override KERNEL := release
bench: build
	@$(B)/kernel.sh >/dev/null && $(B)/testmods.sh # this kernel, whatever build made
	@tools/testing/bench/all.sh $(BENCH_OUT)
