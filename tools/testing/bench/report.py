#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Turns the CSV files of one `make bench` run into tables and plots.

    report.py DIR

DIR holds what the run wrote: backend.csv, backend-rate.csv and
backend-threads.csv (cargo bench transfer), perftest-{same,same-rings,two,two-net,two-wire,two-wire-mtu9000}.csv,
cost{,-rings}.csv, nvme-of-{same,two,two-wire,two-wire-mtu9000}.csv,
flood.csv, flood-own-cpus.csv and run.txt (when, where, which kernel). Writes DIR/results.md (every
table, virtio_rdma beside its peer with the ratio) and PNG plots drawn by
gnuplot: bandwidth and latency against message size, log axes, virtio_rdma0
beside rxe0, for one guest (virtqueues, then queues in guest memory, then
both modes together) and for two (ID 42, then the net personality: both
devices on one virtio-net function), and the backend beside memcpy.
Missing inputs are skipped; a run never fails on a number.
"""

import csv
import math
import os
import subprocess
import sys
from collections import defaultdict


def read(path):
    if not os.path.exists(path):
        return None
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def fmt(v):
    v = float(v)
    if v >= 100:
        return f"{v:.0f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def cell(r):
    """A ratio as a table cell: "-" where there is no usable number (a zero rate, an infinite
    latency, a column an older run did not write)."""
    return f"{r:.2f}" if math.isfinite(r) and r > 0 else "-"


def share(a, b):
    """b / a as a float, nan without a usable a."""
    return b / a if a else float("nan")


def ratio(test, ours, peer):
    """Above 1: virtio_rdma0 is better (latency: the peer's time over ours), as a table cell."""
    ours, peer = float(ours), float(peer)
    if test.endswith("_lat"):
        ours, peer = peer, ours
    return cell(share(peer, ours))


def gnuplot(script):
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


def size_label(n):
    for unit, shift in (("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def xtics(sizes):
    """Tics at every other power of two of the sizes, labelled in binary units."""
    sizes = sorted(set(sizes))
    if not sizes:
        return ""
    tics, n = [], sizes[0]
    while n <= sizes[-1]:
        tics.append(f'"{size_label(n)}" {n}')
        n *= 4
    return "set xtics (" + ", ".join(tics) + ")\n"


LINE_STYLES = """
set terminal pngcairo size 900,560 noenhanced font ',10'
set logscale x 2
set logscale y 10
set format y '%g'
set grid
set key outside right top
set style line 1 lc rgb '#1f77b4' lw 2 pt 7 ps 0.8
set style line 2 lc rgb '#1f77b4' lw 2 pt 5 ps 0.8 dt 2
set style line 3 lc rgb '#d62728' lw 2 pt 7 ps 0.8
set style line 4 lc rgb '#d62728' lw 2 pt 5 ps 0.8 dt 2
set style line 5 lc rgb '#2ca02c' lw 2 pt 7 ps 0.8
set style line 6 lc rgb '#2ca02c' lw 2 pt 5 ps 0.8 dt 2
set style line 7 lc rgb '#1f77b4' lw 2 pt 5 ps 0.8 dt 3
set style line 8 lc rgb '#1f77b4' lw 2 pt 7 ps 0.8
set style line 9 lc rgb '#1f77b4' lw 2 pt 5 ps 0.8 dt 2
set style line 10 lc rgb '#d62728' lw 2 pt 5 ps 0.8 dt 3
set style line 11 lc rgb '#d62728' lw 2 pt 7 ps 0.8
set style line 12 lc rgb '#d62728' lw 2 pt 5 ps 0.8 dt 2
"""


def plot_perftest(out, where, rows, tests, png, ylabel, title, devices=("virtio_rdma0", "rxe0")):
    """One PNG: each test for each device (solid: the first, dashed: the second...)."""
    series = []
    for ti, t in enumerate(tests):
        for di, dev in enumerate(devices):
            pts = sorted(
                (int(r["bytes"]), float(r["value"]))
                for r in rows
                if r["test"] == t and r["device"] == dev and 0 < float(r["value"]) < math.inf
            )
            if pts:
                # A style per test and device: solid, dashed (and dotted for a third device).
                style = ti * 2 + di + 1 if len(devices) == 2 else 7 + ti * 3 + di
                series.append((f"{t} {dev}", pts, style))
    if not series:
        return None
    plots, data = [], []
    for name, pts, style in series:
        plots.append(f"'-' using 1:2 with linespoints ls {style} title '{name}'")
        data.append("\n".join(f"{x} {y}" for x, y in pts) + "\ne")
    gnuplot(
        LINE_STYLES
        + xtics(x for _, pts, _ in series for x, _ in pts)
        + f"set output '{os.path.join(out, png)}'\n"
        + f'set title "{title}"\nset xlabel \'message size (bytes)\'\nset ylabel \'{ylabel}\'\n'
        + "plot " + ", ".join(plots) + "\n" + "\n".join(data) + "\n"
    )
    return png


def run_of(meta, csv):
    """The run (a line of run.txt that starts with its date) that wrote CSV:
    the one above the line of a partial run (`BENCH_ONLY`) that lists it
    among what a stage wrote, else the first."""
    runs = [line for line in meta if line[:4].isdigit()]
    latest = runs[0] if runs else ""
    for line in meta:
        if line[:4].isdigit():
            latest = line
        elif line.strip().endswith(".csv") and " wrote: " in line and csv in line.split(" wrote: ")[1].split():
            return latest
    return runs[0] if runs else ""


def perftest_section(out, where, label, meta, short=None):
    """The table and plots of perftest-WHERE.csv; SHORT names it in the plots' titles."""
    rows = read(os.path.join(out, f"perftest-{where}.csv"))
    if not rows:
        return []
    run = run_of(meta, f"perftest-{where}.csv")
    md = [f"### perftest, {label}", ""]
    by = defaultdict(dict)
    order = []
    for r in rows:
        key = (r["test"], int(r["bytes"]))
        if key not in by:
            order.append(key)
        by[key][r["device"]] = r
    md += ["| test | bytes | virtio_rdma0 | rxe0 | unit | virtio/rxe |", "|---|---:|---:|---:|---|---:|"]
    for key in order:
        d = by[key]
        if "virtio_rdma0" not in d or "rxe0" not in d:
            continue
        v, r = d["virtio_rdma0"]["value"], d["rxe0"]["value"]
        md.append(
            f"| {key[0]} | {key[1]} | {fmt(v)} | {fmt(r)} | {d['rxe0']['unit']} "
            f"| {ratio(key[0], v, r)} |"
        )
    md += ["", "virtio/rxe above 1: virtio_rdma0 is faster (for latency, rxe's time over ours).", ""]
    # The run on a line of its own: with the key outside, one line is cut off.
    sub = f"{short or label}\\n{run}"
    bw = plot_perftest(out, where, rows, ["ib_write_bw", "ib_read_bw", "ib_send_bw"],
                       f"perftest-{where}-bw.png", "MiB/s", f"bandwidth, {sub}")
    lat = plot_perftest(out, where, rows, ["ib_write_lat", "ib_send_lat"],
                        f"perftest-{where}-lat.png", "usec (average)", f"latency, {sub}")
    for png in (bw, lat):
        if png:
            md += [f"![{png}]({png})", ""]
    return md


def modes_section(out):
    """The device with queues in guest memory beside its virtqueue mode and rxe, one guest:
    two guest runs of one make bench, each beside its own rxe."""
    vq = read(os.path.join(out, "perftest-same.csv"))
    rings = read(os.path.join(out, "perftest-same-rings.csv"))
    if not vq or not rings:
        return []
    value = defaultdict(dict)
    order = []
    for mode, rows in (("virtqueues", vq), ("rings", rings)):
        for r in rows:
            key = (r["test"], int(r["bytes"]))
            if key not in value:
                order.append(key)
            dev = "rxe0" if r["device"] == "rxe0" else "virtio_rdma0"
            value[key][f"{dev} {mode}"] = float(r["value"])
            value[key]["unit"] = r["unit"]
    md = ["### Queues in guest memory beside virtqueues (one guest)", "",
          "| test | bytes | virtqueues | rings | unit | rings/virtqueues | rings/rxe |",
          "|---|---:|---:|---:|---|---:|---:|"]
    for key in order:
        d = value[key]
        if not all(k in d for k in ("virtio_rdma0 virtqueues", "virtio_rdma0 rings", "rxe0 rings")):
            continue
        v, r, x = d["virtio_rdma0 virtqueues"], d["virtio_rdma0 rings"], d["rxe0 rings"]
        md.append(f"| {key[0]} | {key[1]} | {fmt(v)} | {fmt(r)} | {d['unit']} "
                  f"| {ratio(key[0], r, v)} | {ratio(key[0], r, x)} |")
    md += ["", "Above 1: the rings are faster (for latency, the other's time over theirs). "
           "rings/rxe compares with rxe measured in the rings run.", ""]
    # One series per device and mode; rxe from the virtqueue run.
    merged = []
    for mode, rows in (("virtqueues", vq), ("rings", rings)):
        for r in rows:
            if r["device"] == "rxe0" and mode == "rings":
                continue
            name = "rxe0" if r["device"] == "rxe0" else f"virtio_rdma0 {mode}"
            merged.append(dict(r, device=name))
    devices = ("virtio_rdma0 rings", "virtio_rdma0 virtqueues", "rxe0")
    for tests, png, ylabel, title in (
            (["ib_write_bw", "ib_send_bw"], "perftest-modes-bw.png", "MiB/s", "bandwidth"),
            (["ib_write_lat", "ib_send_lat"], "perftest-modes-lat.png", "usec (average)", "latency")):
        if plot_perftest(out, "same", merged, tests, png, ylabel, f"{title} by queue mode, one guest", devices):
            md += [f"![{png}]({png})", ""]
    return md


def cost_section(out, name, label):
    """What one 2-byte ib_write_lat round trip costs the guest (perftest.sh's cost CSV)."""
    cost = read(os.path.join(out, name))
    if not cost:
        return []
    md = [f"### What one 2-byte ib_write_lat round trip costs the guest ({label})", "",
          "| device | interrupts/message | system calls/message (client) |", "|---|---:|---:|"]
    return md + [f"| {r['device']} | {float(r['interrupts_per_msg']):.2f} | "
                 f"{float(r['syscalls_per_msg']):.2f} |" for r in cost] + [""]


def nvme_section(out, where, label):
    rows = read(os.path.join(out, f"nvme-of-{where}.csv"))
    if not rows:
        return []
    md = [f"### NVMe-oF, {label}", "",
          "| job | RDMA IOPS | RDMA MiB/s | TCP IOPS | TCP MiB/s | RDMA/TCP (IOPS) |",
          "|---|---:|---:|---:|---:|---:|"]
    by = defaultdict(dict)
    order = []
    for r in rows:
        if r["job"] not in by:
            order.append(r["job"])
        by[r["job"]][r["transport"]] = r
    for job in order:
        d = by[job]
        if "rdma" not in d or "tcp" not in d:
            continue
        ri, ti = float(d["rdma"]["iops"]), float(d["tcp"]["iops"])
        md.append(f"| {job} | {ri:.0f} | {fmt(d['rdma']['mib_s'])} | {ti:.0f} | "
                  f"{fmt(d['tcp']['mib_s'])} | {ri / ti if ti else float('nan'):.2f} |")
    return md + [""]


def rate_cells(r):
    """A rate row's two cells: millions of work requests per second of the clock, and per second of
    the devices' CPU."""
    return f"{float(r['wr_per_s']) / 1e6:.2f} | {cell(float(r.get('wr_per_cpu_s') or 'nan') / 1e6)}"


def backend_section(out, run):
    rows = read(os.path.join(out, "backend.csv"))
    if not rows:
        return []
    md = ["### The backend alone (in-process, two devices)", "",
          "| op | bytes | backend MiB/s | memcpy MiB/s | backend/memcpy |", "|---|---:|---:|---:|---:|"]
    for r in rows:
        md.append(f"| {r['op']} | {r['bytes']} | {fmt(r['backend_mib_s'])} | "
                  f"{fmt(r['memcpy_mib_s'])} | {float(r['ratio']):.2f} |")
    md += ["", "Bandwidth with two batches of eight in flight (the queue kept full, as perftest does).", ""]
    rates = read(os.path.join(out, "backend-rate.csv")) or []
    if rates:
        md += ["| op | bytes | in flight | M work requests/s | M per second of the devices' CPU (per core) |",
               "|---|---:|---:|---:|---:|"]
        md += [f"| {r['op']} | {r['bytes']} | {r.get('in_flight', '8')} | {rate_cells(r)} |" for r in rates]
        md += ["", "Eight in flight: one batch at a time, the device woken per batch; the clock's rate is "
               "also bounded by the harness that posts and polls on the other core.", ""]
    threads = read(os.path.join(out, "backend-threads.csv")) or []
    if threads:
        md += ["| threads per device | M 64-byte WRITEs/s, four QP pairs | M per second of the devices' CPU |",
               "|---:|---:|---:|"]
        md += [f"| {r['threads']} | {rate_cells(r)} |" for r in threads]
        md += ["", "Four RC pairs between two devices, every SQ full (`--threads`: half the QPs on each "
               "thread when there are two); the harness that posts and polls runs on one of the host's cores.", ""]
    plots, data = [], []
    for i, op in enumerate(("WRITE", "SEND")):
        pts = [(int(r["bytes"]), float(r["backend_mib_s"])) for r in rows if r["op"] == op]
        plots.append(f"'-' using 1:2 with linespoints ls {2 * i + 1} title '{op}'")
        data.append("\n".join(f"{x} {y}" for x, y in pts) + "\ne")
    pts = [(int(r["bytes"]), float(r["memcpy_mib_s"])) for r in rows if r["op"] == "WRITE"]
    plots.append("'-' using 1:2 with linespoints ls 6 title 'memcpy'")
    data.append("\n".join(f"{x} {y}" for x, y in pts) + "\ne")
    gnuplot(
        LINE_STYLES
        + xtics(int(r["bytes"]) for r in rows)
        + f"set output '{os.path.join(out, 'backend.png')}'\n"
        + f'set title "backend, device to device\\n{run}"\nset xlabel \'message size (bytes)\'\n'
        + "set ylabel 'MiB/s'\nplot " + ", ".join(plots) + "\n" + "\n".join(data) + "\n"
    )
    return md + ["![backend.png](backend.png)", ""]


def flood_section(out, run):
    """The victim's bandwidth alone, beside a burn and beside a flood, for each CPU layout."""
    layouts = [("flood.csv", "shared", "shared by both guests and the backend"),
               ("flood-own-cpus.csv", "own CPUs",
                "each guest's own, its device's threads there too (`--own-cpus`)")]
    floods = [(short, cpus, r) for name, short, cpus in layouts for r in read(os.path.join(out, name)) or []]
    if not floods:
        return []
    md = ["### Two tenants", "",
          "The victim's 64 KiB ib_write_bw alone, beside a guest that only burns its vCPUs, and "
          "beside a guest flooding its own virtio_rdma0 with 4 MiB writes (medians of three rounds "
          "of ten seconds; every round in flood*-rounds.csv): on host CPUs shared by everything "
          "(guests of 2 vCPUs), and with each guest on CPUs of its own (`run.sh --own-cpus`: half the "
          "host's CPUs, a vCPU per CPU), its QEMU and its device's backend threads pinned there, as a "
          "cloud host places tenants. Medians are each column's own; a ratio of two may mix rounds.",
          "",
          "| host CPUs | victim alone MiB/s | beside a burn MiB/s | beside a 4 MiB flood MiB/s "
          "| share kept (burn) | share kept (flood) | flood / burn | the flood's own MiB/s |",
          "|---|---:|---:|---:|---:|---:|---:|---:|"]
    def rate(v):
        return fmt(v) if math.isfinite(v) else "-"

    bars = []
    for short, cpus, r in floods:
        # An empty cell (a phase that gave no number, a column an older run did not write): nan.
        a, b, f, own = (float(r.get(k) or "nan") for k in ("alone", "burned", "flooded", "flood"))
        md.append(f"| {cpus} | {rate(a)} | {rate(b)} | {rate(f)} "
                  f"| {cell(share(a, b))} | {cell(share(a, f))} | {cell(share(b, f))} | {rate(own)} |")
        bars.append(f'"{short}" ' + " ".join(str(v if math.isfinite(v) else 0) for v in (a, b, f)))
    md += ["", "flood / burn: what the flood costs the victim beyond busy vCPUs: its share of the "
           "device, and (on shared CPUs) the backend thread the flood keeps busy on the same host cores.",
           ""]
    rows = "\n".join(bars) + "\ne\n"
    gnuplot(
        "set terminal pngcairo size 700,480 noenhanced font ',10'\n"
        + f"set output '{os.path.join(out, 'flood.png')}'\n"
        + f'set title "the victim\'s 64 KiB ib_write_bw, by host CPU layout\\n{run}"\n'
        + "set style data histograms\nset style histogram clustered gap 1\n"
        + "set style fill solid 0.8 border -1\nset yrange [0:*]\nset grid y\n"
        + "set ylabel 'MiB/s'\nset key inside right top\n"
        + "plot '-' using 2:xtic(1) lc rgb '#1f77b4' title 'alone', "
        + "'-' using 3 lc rgb '#2ca02c' title 'beside a burn', "
        + "'-' using 4 lc rgb '#d62728' title 'beside a 4 MiB flood'\n"
        + rows * 3
    )
    return md + ["![flood.png](flood.png)", ""]


def main():
    out = sys.argv[1]
    run = ""
    if os.path.exists(os.path.join(out, "run.txt")):
        with open(os.path.join(out, "run.txt")) as f:
            meta = [line.rstrip("\n") for line in f if line.strip()]
        run = meta[0] if meta else ""
    else:
        meta = []
    md = ["# make bench results", ""] + [f"- {line}" for line in meta] + [""]
    md += backend_section(out, run)
    md += perftest_section(out, "same", "one guest", meta)
    md += cost_section(out, "cost.csv", "one guest")
    md += nvme_section(out, "same", "one guest")
    md += perftest_section(out, "same-rings", "one guest, queues in guest memory (--rings)", meta)
    md += cost_section(out, "cost-rings.csv", "one guest, queues in guest memory")
    md += modes_section(out)
    md += perftest_section(out, "two", "two guests", meta)
    md += perftest_section(out, "two-net", "two guests of the net personality (virtio_rdma0 on the RoCE queues, "
                           "rxe0 on the Ethernet of the same virtio-net function)", meta,
                           "two guests, net personality")
    md += nvme_section(out, "two", "two guests")
    md += perftest_section(out, "two-wire", "two hosts (a backend each, their uplinks on one link; "
                           "virtio_rdma0 and rxe0 over the same link)", meta, "two hosts")
    md += nvme_section(out, "two-wire", "two hosts")
    md += perftest_section(out, "two-wire-mtu9000", "two hosts, jumbo frames (MTU 9000 on the guests, "
                           "the backends' ports and the link: IB MTU 4096 for both devices)", meta,
                           "two hosts, MTU 9000")
    md += nvme_section(out, "two-wire-mtu9000", "two hosts, jumbo frames (MTU 9000)")
    md += flood_section(out, run)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(md))
    print(os.path.join(out, "results.md"))


if __name__ == "__main__":
    main()
