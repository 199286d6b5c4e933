// SPDX-License-Identifier: GPL-2.0
//! Build-time ABI check against `include/uapi/linux/virtio_rdma.h`.
//!
//! The header is the single source of the device ABI. This script reads the
//! members of the structures the backend mirrors (see [`CHECKED_STRUCTS`])
//! from the header, compiles a small C program with the host C compiler that
//! prints `sizeof`/`offsetof` of every structure and member and the value of
//! every constant in [`CHECKED_CONSTS`], and writes `abi_check.rs` into
//! `OUT_DIR`: `const _: () = assert!(..)` items that compare those numbers
//! with the Rust definitions in `src/abi.rs`. A layout drift on either side
//! fails the build.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Header structures that `src/abi.rs` mirrors (Rust name: CamelCase).
const CHECKED_STRUCTS: &[&str] = &[
    "virtio_rdma_config",
    "virtio_rdma_ctrl_hdr",
    "virtio_rdma_ctrl_rsp_hdr",
    "virtio_rdma_cmd_query_port",
    "virtio_rdma_rsp_query_port",
    "virtio_rdma_rsp_create_pd",
    "virtio_rdma_cmd_destroy_pd",
    "virtio_rdma_cmd_query_pkey",
    "virtio_rdma_rsp_query_pkey",
    "virtio_rdma_cmd_add_gid",
    "virtio_rdma_cmd_del_gid",
    "virtio_rdma_cmd_create_cq",
    "virtio_rdma_rsp_create_cq",
    "virtio_rdma_cmd_destroy_cq",
    "virtio_rdma_cmd_get_dma_mr",
    "virtio_rdma_rsp_create_mr",
    "virtio_rdma_cmd_create_mr",
    "virtio_rdma_cmd_map_mr_sg",
    "virtio_rdma_rsp_map_mr_sg",
    "virtio_rdma_cmd_reg_user_mr",
    "virtio_rdma_cmd_dereg_mr",
    "virtio_rdma_cmd_modify_mr",
    "virtio_rdma_sq_flush",
    "virtio_rdma_cmd_alloc_mw",
    "virtio_rdma_rsp_alloc_mw",
    "virtio_rdma_cmd_dealloc_mw",
    "virtio_rdma_cmd_create_qp",
    "virtio_rdma_rsp_create_qp",
    "virtio_rdma_av",
    "virtio_rdma_qp_cap",
    "virtio_rdma_qp_attr",
    "virtio_rdma_cmd_modify_qp",
    "virtio_rdma_cmd_query_qp",
    "virtio_rdma_rsp_query_qp",
    "virtio_rdma_cmd_destroy_qp",
    "virtio_rdma_cmd_req_notify_cq",
    "virtio_rdma_cmd_query_counters",
    "virtio_rdma_rsp_query_counters",
    "virtio_rdma_cmd_alloc_counter_set",
    "virtio_rdma_rsp_alloc_counter_set",
    "virtio_rdma_cmd_dealloc_counter_set",
    "virtio_rdma_cmd_bind_counter_set",
    "virtio_rdma_sq_rdma",
    "virtio_rdma_sq_atomic",
    "virtio_rdma_sq_ud",
    "virtio_rdma_sq_reg",
    "virtio_rdma_sq_bind",
    "virtio_rdma_sq_req",
    "virtio_rdma_sge",
    "virtio_rdma_rq_req",
    "virtio_rdma_cq_req",
    "virtio_rdma_event",
    "virtio_rdma_ring",
    "virtio_rdma_ring_record",
    "virtio_rdma_ring_cqe",
    "virtio_rdma_cmd_create_cq_ring",
    "virtio_rdma_cmd_create_qp_ring",
    "virtio_rdma_cmd_resize_cq_ring",
    "virtio_rdma_rsp_resize_cq_ring",
    "virtio_rdma_comp_event",
    "virtio_rdma_cmd_create_srq",
    "virtio_rdma_rsp_create_srq",
    "virtio_rdma_cmd_modify_srq",
    "virtio_rdma_cmd_query_srq",
    "virtio_rdma_rsp_query_srq",
    "virtio_rdma_cmd_destroy_srq",
    "virtio_rdma_rsp_alloc_xrcd",
    "virtio_rdma_cmd_dealloc_xrcd",
    "virtio_rdma_cmd_create_xrc_srq",
    "virtio_rdma_cmd_create_xrc_tgt_qp",
    "virtio_rdma_sq_xrc",
];

/// Header constants (enumerators and macros) that `src/abi.rs` defines too.
const CHECKED_CONSTS: &[&str] = &[
    "VIRTIO_RDMA_CONFIG_SPACE_SIZE",
    "VIRTIO_RDMA_MAX_CQ_LIMIT",
    "VIRTIO_RDMA_MAX_QP_LIMIT",
    "VIRTIO_RDMA_ATOMIC_NONE",
    "VIRTIO_RDMA_ATOMIC_HCA",
    "VIRTIO_RDMA_ATOMIC_GLOB",
    "VIRTIO_RDMA_CTRL_VQ",
    "VIRTIO_RDMA_CMD_QUERY_PORT",
    "VIRTIO_RDMA_CMD_CREATE_CQ",
    "VIRTIO_RDMA_CMD_DESTROY_CQ",
    "VIRTIO_RDMA_CMD_CREATE_PD",
    "VIRTIO_RDMA_CMD_DESTROY_PD",
    "VIRTIO_RDMA_CMD_GET_DMA_MR",
    "VIRTIO_RDMA_CMD_CREATE_MR",
    "VIRTIO_RDMA_CMD_MAP_MR_SG",
    "VIRTIO_RDMA_CMD_REG_USER_MR",
    "VIRTIO_RDMA_CMD_DEREG_MR",
    "VIRTIO_RDMA_CMD_CREATE_QP",
    "VIRTIO_RDMA_CMD_MODIFY_QP",
    "VIRTIO_RDMA_CMD_QUERY_QP",
    "VIRTIO_RDMA_CMD_DESTROY_QP",
    "VIRTIO_RDMA_CMD_QUERY_PKEY",
    "VIRTIO_RDMA_CMD_ADD_GID",
    "VIRTIO_RDMA_CMD_DEL_GID",
    "VIRTIO_RDMA_CMD_REQ_NOTIFY_CQ",
    "VIRTIO_RDMA_CMD_QUERY_COUNTERS",
    "VIRTIO_RDMA_CNT_SENT_PKTS",
    "VIRTIO_RDMA_CNT_SENT_BYTES",
    "VIRTIO_RDMA_CNT_RCVD_PKTS",
    "VIRTIO_RDMA_CNT_RCVD_BYTES",
    "VIRTIO_RDMA_CNT_RNR_NAKS_SENT",
    "VIRTIO_RDMA_CNT_RNR_NAKS_RCVD",
    "VIRTIO_RDMA_CNT_DROPPED_NOT_PEER",
    "VIRTIO_RDMA_CNT_DROPPED_BAD_PSN",
    "VIRTIO_RDMA_CNT_DROPPED_BAD_QKEY",
    "VIRTIO_RDMA_CNT_LOC_LEN_ERR",
    "VIRTIO_RDMA_CNT_LOC_QP_OP_ERR",
    "VIRTIO_RDMA_CNT_LOC_PROT_ERR",
    "VIRTIO_RDMA_CNT_WR_FLUSH_ERR",
    "VIRTIO_RDMA_CNT_REM_INV_REQ_ERR",
    "VIRTIO_RDMA_CNT_REM_ACCESS_ERR",
    "VIRTIO_RDMA_CNT_REM_OP_ERR",
    "VIRTIO_RDMA_CNT_RETRY_EXC_ERR",
    "VIRTIO_RDMA_CNT_RNR_RETRY_EXC_ERR",
    "VIRTIO_RDMA_CNT_OTHER_ERR",
    "VIRTIO_RDMA_NUM_COUNTERS",
    "VIRTIO_RDMA_S_OK",
    "VIRTIO_RDMA_S_UNSUPPORTED",
    "VIRTIO_RDMA_S_INVALID",
    "VIRTIO_RDMA_S_NO_RESOURCE",
    "VIRTIO_RDMA_S_NOT_FOUND",
    "VIRTIO_RDMA_S_BUSY",
    "VIRTIO_RDMA_S_FAULT",
    "VIRTIO_RDMA_S_BAD_STATE",
    "VIRTIO_RDMA_PAGE_SHIFT",
    "VIRTIO_RDMA_PAGE_SIZE",
    "VIRTIO_RDMA_NOTIFY_SOLICITED",
    "VIRTIO_RDMA_NOTIFY_NEXT_COMPLETION",
    "VIRTIO_RDMA_EVENT_CQ_ERR",
    "VIRTIO_RDMA_EVENT_QP_FATAL",
    "VIRTIO_RDMA_EVENT_QP_REQ_ERR",
    "VIRTIO_RDMA_EVENT_QP_ACCESS_ERR",
    "VIRTIO_RDMA_F_RINGS",
    "VIRTIO_RDMA_RING_SLOTS",
    "VIRTIO_RDMA_RING_F_NOTIFY",
    "VIRTIO_RDMA_CQ_ARM_NONE",
    "VIRTIO_RDMA_CQ_ARM_NEXT",
    "VIRTIO_RDMA_CQ_ARM_SOLICITED",
    "VIRTIO_RDMA_QP_RING_F_USER",
    "VIRTIO_RDMA_CMD_CREATE_CQ_RING",
    "VIRTIO_RDMA_CMD_CREATE_QP_RING",
    "VIRTIO_RDMA_CMD_RESIZE_CQ_RING",
    "VIRTIO_RDMA_CMD_ALLOC_MW",
    "VIRTIO_RDMA_CMD_DEALLOC_MW",
    "VIRTIO_RDMA_CMD_CREATE_SRQ",
    "VIRTIO_RDMA_CMD_MODIFY_SRQ",
    "VIRTIO_RDMA_CMD_QUERY_SRQ",
    "VIRTIO_RDMA_CMD_DESTROY_SRQ",
    "VIRTIO_RDMA_CMD_ALLOC_COUNTER_SET",
    "VIRTIO_RDMA_CMD_DEALLOC_COUNTER_SET",
    "VIRTIO_RDMA_CMD_BIND_COUNTER_SET",
    "VIRTIO_RDMA_CMD_ALLOC_XRCD",
    "VIRTIO_RDMA_CMD_DEALLOC_XRCD",
    "VIRTIO_RDMA_CMD_CREATE_XRC_SRQ",
    "VIRTIO_RDMA_CMD_CREATE_XRC_TGT_QP",
    "VIRTIO_RDMA_CMD_QUERY_DEVICE",
    "VIRTIO_RDMA_CMD_RESET",
    "VIRTIO_RDMA_CMD_MODIFY_MR",
    "VIRTIO_RDMA_SRQ_F_USER",
    "VIRTIO_RDMA_EVENT_SRQ_LIMIT_REACHED",
    "VIRTIO_RDMA_EVENT_QP_LAST_WQE_REACHED",
];

/// The arguments a queue index macro takes from a (max_cq, max_qp, n) point.
type MacroArgs = fn(u32, u32, u32) -> String;

/// The header's virtqueue index macros, with the arguments each takes;
/// `src/abi.rs` has a function of the same name in lower case computing the
/// same.
const CHECKED_QUEUE_MACROS: &[(&str, MacroArgs)] = &[
    ("VIRTIO_RDMA_CQ_VQ", |_, _, n| format!("{n}")),
    ("VIRTIO_RDMA_SQ_VQ", |c, _, n| format!("{c}, {n}")),
    ("VIRTIO_RDMA_RQ_VQ", |c, _, n| format!("{c}, {n}")),
    ("VIRTIO_RDMA_EVENT_VQ", |c, q, _| format!("{c}, {q}")),
    ("VIRTIO_RDMA_NOTIFY_VQ", |c, q, _| format!("{c}, {q}")),
    ("VIRTIO_RDMA_COMP_VQ", |c, q, n| format!("{c}, {q}, {n}")),
];

/// Points at which the queue index macros are compared.
const QUEUE_MACRO_POINTS: &[(u32, u32, u32)] = &[(1, 1, 0), (32, 16, 5), (253, 1, 0), (7, 100, 99)];

/// Minimal stand-in for <linux/types.h> when the host has no kernel headers.
const TYPES_SHIM: &str = "#ifndef _LINUX_TYPES_H\n#define _LINUX_TYPES_H\n\
typedef unsigned char __u8;\ntypedef unsigned short __u16;\n\
typedef unsigned int __u32;\ntypedef unsigned long long __u64;\n\
typedef __u16 __le16;\ntypedef __u32 __le32;\ntypedef __u64 __le64;\n#endif\n";

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let header = manifest.join("../../include/uapi/linux/virtio_rdma.h");
    println!("cargo:rerun-if-changed={}", header.display());
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");

    let text = fs::read_to_string(&header)
        .unwrap_or_else(|e| panic!("cannot read the ABI header {}: {e}", header.display()));
    let structs = parse_structs(&text);
    for (name, _) in &structs {
        if !CHECKED_STRUCTS.contains(&name.as_str()) {
            println!("cargo:warning=struct {name} in virtio_rdma.h has no Rust mirror yet");
        }
    }

    let probe_c = out.join("abi_probe.c");
    fs::write(&probe_c, probe_source(&header, &structs)).expect("write abi_probe.c");
    let probe = out.join("abi_probe");
    compile_probe(&probe_c, &probe, &out);
    let output = Command::new(&probe).output().expect("run abi_probe");
    assert!(output.status.success(), "abi_probe failed");
    let generated = String::from_utf8(output.stdout).expect("abi_probe output is UTF-8");
    fs::write(out.join("abi_check.rs"), generated).expect("write abi_check.rs");
}

/// Members of the checked structures, in header order.
fn parse_structs(text: &str) -> Vec<(String, Vec<String>)> {
    let mut structs = Vec::new();
    let mut current: Option<(String, Vec<String>)> = None;
    for raw in text.lines() {
        let line = raw.split("/*").next().unwrap_or("").trim();
        if let Some(rest) = line.strip_prefix("struct ") {
            if let Some(name) = rest.strip_suffix('{') {
                current = Some((name.trim().to_string(), Vec::new()));
                continue;
            }
        }
        if let Some((name, fields)) = current.as_mut() {
            if line.starts_with('}') {
                structs.push((name.clone(), std::mem::take(fields)));
                current = None;
            } else if !line.is_empty() {
                let decl = line
                    .strip_suffix(';')
                    .unwrap_or_else(|| panic!("struct {name}: cannot parse member `{line}`"));
                let ident = decl
                    .split_whitespace()
                    .last()
                    .and_then(|d| d.split('[').next())
                    .unwrap_or_else(|| panic!("struct {name}: cannot parse member `{line}`"));
                fields.push(ident.to_string());
            }
        }
    }
    for want in CHECKED_STRUCTS {
        assert!(
            structs.iter().any(|(n, _)| n == want),
            "struct {want} is missing from virtio_rdma.h"
        );
    }
    structs
}

fn camel(name: &str) -> String {
    name.split('_')
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// C source printing the Rust assertions.
fn probe_source(header: &Path, structs: &[(String, Vec<String>)]) -> String {
    let mut c = String::new();
    let _ = writeln!(c, "#include <stddef.h>\n#include <stdio.h>");
    let _ = writeln!(c, "#include \"{}\"", header.display());
    let _ = writeln!(c, "int main(void) {{");
    let _ = writeln!(
        c,
        "  puts(\"// Generated by build.rs from virtio_rdma.h; do not edit.\");"
    );
    for (name, fields) in structs {
        if !CHECKED_STRUCTS.contains(&name.as_str()) {
            continue;
        }
        let rust = format!("crate::abi::{}", camel(name));
        let _ = writeln!(
            c,
            "  printf(\"const _: () = assert!(core::mem::size_of::<{rust}>() == %zu, \
             \\\"size of struct {name}\\\");\\n\", sizeof(struct {name}));"
        );
        let _ = writeln!(
            c,
            "  puts(\"const _: () = assert!(core::mem::size_of::<{rust}>() % 8 == 0, \
             \\\"struct {name}: size is not a multiple of 8\\\");\");"
        );
        for f in fields {
            let _ = writeln!(
                c,
                "  printf(\"const _: () = assert!(core::mem::offset_of!({rust}, {f}) == %zu, \
                 \\\"offset of {name}.{f}\\\");\\n\", offsetof(struct {name}, {f}));"
            );
            let _ = writeln!(
                c,
                "  printf(\"const _: () = assert!(crate::abi::field_size(|s: &{rust}| &s.{f}) \
                 == %zu, \\\"size of {name}.{f}\\\");\\n\", \
                 sizeof(((struct {name} *)0)->{f}));"
            );
        }
    }
    for k in CHECKED_CONSTS {
        let _ = writeln!(
            c,
            "  printf(\"const _: () = assert!(crate::abi::{k} as u64 == %lluu64, \
             \\\"value of {k}\\\");\\n\", (unsigned long long)({k}));"
        );
    }
    for &(max_cq, max_qp, n) in QUEUE_MACRO_POINTS {
        for (name, args) in CHECKED_QUEUE_MACROS {
            let call = format!("{name}({})", args(max_cq, max_qp, n));
            let rust = format!("crate::abi::{}", call.to_lowercase());
            let _ = writeln!(
                c,
                "  printf(\"const _: () = assert!({rust} as u64 == %lluu64, \
                 \\\"value of {call}\\\");\\n\", (unsigned long long)({call}));"
            );
        }
    }
    let _ = writeln!(c, "  return 0;\n}}");
    c
}

/// Compiles the probe; falls back to a <linux/types.h> shim if needed.
fn compile_probe(src: &Path, exe: &Path, out: &Path) {
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let run = |extra: Option<&Path>| {
        let mut cmd = Command::new(&cc);
        if let Some(dir) = extra {
            cmd.arg("-I").arg(dir);
        }
        cmd.arg("-Wall")
            .arg("-Werror")
            .arg("-o")
            .arg(exe)
            .arg(src)
            .output()
    };
    match run(None) {
        Ok(o) if o.status.success() => return,
        _ => {}
    }
    let shim = out.join("shim");
    fs::create_dir_all(shim.join("linux")).expect("create shim dir");
    fs::write(shim.join("linux/types.h"), TYPES_SHIM).expect("write types.h shim");
    let o = run(Some(&shim)).unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}`: {e}"));
    assert!(
        o.status.success(),
        "compiling the ABI probe failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
