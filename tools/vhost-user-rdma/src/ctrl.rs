// SPDX-License-Identifier: GPL-2.0
//! Control commands: parse a request, act on the device's tables, build the
//! response.
//!
//! [`Ctrl::execute`] works on plain bytes (the device-readable part of a
//! chain, and the room in its device-writable part), so it is independent
//! of virtqueues; `ctrlq` moves the bytes. Nothing the guest sends can make
//! it panic: every length, port, index and handle is checked, and a bad
//! request gets a status, never a side effect.

use std::net::Ipv6Addr;
use std::sync::{Mutex, MutexGuard};

use log::{debug, info, warn};
use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::abi::*;
use crate::limits::{self, Limits};
use crate::resources::{GidEntry, GidTable, HandleTable};

/// Size of the response header.
pub const RSP_HDR_LEN: usize = core::mem::size_of::<VirtioRdmaCtrlRspHdr>();
/// Largest device-readable part accepted for one control request.
pub const MAX_REQUEST_LEN: usize = 64 * 1024;
/// `enum ib_gid_type`: the largest value (IB_GID_TYPE_ROCE_UDP_ENCAP).
const MAX_GID_TYPE: u32 = 2;

/// Mutable device state behind the control queue.
#[derive(Debug)]
struct State {
    pds: HandleTable,
    gids: GidTable,
}

impl State {
    fn new() -> Self {
        State {
            pds: HandleTable::new(limits::MAX_PD),
            gids: GidTable::new(limits::GID_TBL_LEN as usize),
        }
    }
}

/// The control-command engine of one device.
#[derive(Debug)]
pub struct Ctrl {
    name: String,
    limits: Limits,
    state: Mutex<State>,
}

/// A failed command: the status for the guest.
type CmdResult = Result<Vec<u8>, u8>;

/// Name and response-body size of a command, `None` if unknown.
fn command_info(cmd: u32) -> Option<(&'static str, usize)> {
    use core::mem::size_of;
    Some(match cmd {
        VIRTIO_RDMA_CMD_QUERY_PORT => ("QUERY_PORT", size_of::<VirtioRdmaRspQueryPort>()),
        VIRTIO_RDMA_CMD_CREATE_CQ => ("CREATE_CQ", 0),
        VIRTIO_RDMA_CMD_DESTROY_CQ => ("DESTROY_CQ", 0),
        VIRTIO_RDMA_CMD_CREATE_PD => ("CREATE_PD", size_of::<VirtioRdmaRspCreatePd>()),
        VIRTIO_RDMA_CMD_DESTROY_PD => ("DESTROY_PD", 0),
        VIRTIO_RDMA_CMD_GET_DMA_MR => ("GET_DMA_MR", 0),
        VIRTIO_RDMA_CMD_CREATE_MR => ("CREATE_MR", 0),
        VIRTIO_RDMA_CMD_MAP_MR_SG => ("MAP_MR_SG", 0),
        VIRTIO_RDMA_CMD_REG_USER_MR => ("REG_USER_MR", 0),
        VIRTIO_RDMA_CMD_DEREG_MR => ("DEREG_MR", 0),
        VIRTIO_RDMA_CMD_CREATE_QP => ("CREATE_QP", 0),
        VIRTIO_RDMA_CMD_MODIFY_QP => ("MODIFY_QP", 0),
        VIRTIO_RDMA_CMD_QUERY_QP => ("QUERY_QP", 0),
        VIRTIO_RDMA_CMD_DESTROY_QP => ("DESTROY_QP", 0),
        VIRTIO_RDMA_CMD_QUERY_PKEY => ("QUERY_PKEY", size_of::<VirtioRdmaRspQueryPkey>()),
        VIRTIO_RDMA_CMD_ADD_GID => ("ADD_GID", 0),
        VIRTIO_RDMA_CMD_DEL_GID => ("DEL_GID", 0),
        VIRTIO_RDMA_CMD_REQ_NOTIFY_CQ => ("REQ_NOTIFY_CQ", 0),
        _ => return None,
    })
}

impl Ctrl {
    /// A device with empty tables; `name` prefixes its log lines.
    pub fn new(name: &str, limits: Limits) -> Self {
        Ctrl {
            name: name.to_string(),
            limits,
            state: Mutex::new(State::new()),
        }
    }

    /// Forgets every object (device reset).
    pub fn reset(&self) {
        *self.lock() = State::new();
    }

    /// Number of PDs in use.
    pub fn pd_count(&self) -> usize {
        self.lock().pds.len()
    }

    /// GID table entry of port 1.
    pub fn gid(&self, index: usize) -> Option<GidEntry> {
        self.lock().gids.get(index)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the tables
        // inconsistent (every update is a single call), so go on.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs one request: `request` is the device-readable part, `room` the
    /// size of the device-writable part. Returns the response bytes (at
    /// most `room`; empty if not even a status fits).
    pub fn execute(&self, request: &[u8], room: usize) -> Vec<u8> {
        if room < RSP_HDR_LEN {
            warn!(
                "{}: control request without room for a status ({room} writable bytes, need \
                 {RSP_HDR_LEN}); dropped",
                self.name
            );
            return Vec::new();
        }
        let (status, body) = match self.run(request, room - RSP_HDR_LEN) {
            Ok(body) => (VIRTIO_RDMA_S_OK, body),
            Err(status) => (status, Vec::new()),
        };
        let hdr = VirtioRdmaCtrlRspHdr {
            status,
            reserved: [0; 7],
        };
        let mut out = Vec::with_capacity(RSP_HDR_LEN + body.len());
        out.extend_from_slice(hdr.as_bytes());
        out.extend_from_slice(&body);
        out
    }

    fn run(&self, request: &[u8], room: usize) -> CmdResult {
        let Ok((hdr, body)) = VirtioRdmaCtrlHdr::read_from_prefix(request) else {
            warn!(
                "{}: control request of {} bytes is shorter than its {}-byte header",
                self.name,
                request.len(),
                core::mem::size_of::<VirtioRdmaCtrlHdr>()
            );
            return Err(VIRTIO_RDMA_S_INVALID);
        };
        let cmd = hdr.cmd.get();
        let Some((name, rsp_len)) = command_info(cmd) else {
            warn!("{}: unknown control command {cmd}", self.name);
            return Err(VIRTIO_RDMA_S_UNSUPPORTED);
        };
        if room < rsp_len {
            warn!(
                "{}: {name}: response buffer has {room} bytes after the status, needs {rsp_len}",
                self.name
            );
            return Err(VIRTIO_RDMA_S_INVALID);
        }
        match cmd {
            VIRTIO_RDMA_CMD_QUERY_PORT => self.query_port(body),
            VIRTIO_RDMA_CMD_CREATE_PD => self.create_pd(),
            VIRTIO_RDMA_CMD_DESTROY_PD => self.destroy_pd(body),
            VIRTIO_RDMA_CMD_QUERY_PKEY => self.query_pkey(body),
            VIRTIO_RDMA_CMD_ADD_GID => self.add_gid(body),
            VIRTIO_RDMA_CMD_DEL_GID => self.del_gid(body),
            _ => {
                warn!("{}: {name} is not implemented yet", self.name);
                Err(VIRTIO_RDMA_S_UNSUPPORTED)
            }
        }
    }

    /// The request body as `T`, or INVALID if it is too short.
    fn parse<T: FromBytes + KnownLayout + Immutable>(
        &self,
        cmd: &str,
        body: &[u8],
    ) -> Result<T, u8> {
        T::read_from_prefix(body).map(|(v, _)| v).map_err(|_| {
            warn!(
                "{}: {cmd}: request body of {} bytes, needs {}",
                self.name,
                body.len(),
                core::mem::size_of::<T>()
            );
            VIRTIO_RDMA_S_INVALID
        })
    }

    fn check_port(&self, cmd: &str, port: u32) -> Result<(), u8> {
        if port == 0 || port > limits::PHYS_PORT_CNT {
            warn!(
                "{}: {cmd}: port {port} does not exist (ports are 1..={})",
                self.name,
                limits::PHYS_PORT_CNT
            );
            return Err(VIRTIO_RDMA_S_INVALID);
        }
        Ok(())
    }

    fn query_port(&self, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdQueryPort = self.parse("QUERY_PORT", body)?;
        self.check_port("QUERY_PORT", u32::from(req.port))?;
        let rsp = VirtioRdmaRspQueryPort {
            state: limits::IB_PORT_ACTIVE,
            max_mtu: limits::IB_MTU_1024,
            active_mtu: limits::IB_MTU_1024,
            phys_state: limits::IB_PORT_PHYS_STATE_LINK_UP,
            phys_mtu: U32::new(1024),
            gid_tbl_len: U32::new(limits::GID_TBL_LEN),
            port_cap_flags: U32::new(limits::IB_PORT_CM_SUP),
            max_msg_sz: U32::new(limits::MAX_MSG_SZ),
            bad_pkey_cntr: U32::new(0),
            qkey_viol_cntr: U32::new(0),
            pkey_tbl_len: U16::new(limits::PKEY_TBL_LEN),
            active_width: limits::IB_WIDTH_1X,
            reserved0: 0,
            active_speed: U16::new(limits::IB_SPEED_SDR),
            reserved: [0; 6],
        };
        debug!("{}: QUERY_PORT port {}", self.name, req.port);
        Ok(rsp.as_bytes().to_vec())
    }

    fn create_pd(&self) -> CmdResult {
        let Some(pdn) = self.lock().pds.alloc() else {
            warn!(
                "{}: CREATE_PD: all {} protection domains are in use",
                self.name,
                limits::MAX_PD
            );
            return Err(VIRTIO_RDMA_S_NO_RESOURCE);
        };
        debug!("{}: CREATE_PD -> pdn {pdn}", self.name);
        let rsp = VirtioRdmaRspCreatePd {
            pdn: U32::new(pdn),
            reserved: U32::new(0),
        };
        Ok(rsp.as_bytes().to_vec())
    }

    fn destroy_pd(&self, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdDestroyPd = self.parse("DESTROY_PD", body)?;
        let pdn = req.pdn.get();
        if !self.lock().pds.free(pdn) {
            warn!("{}: DESTROY_PD: pdn {pdn} does not exist", self.name);
            return Err(VIRTIO_RDMA_S_NOT_FOUND);
        }
        debug!("{}: DESTROY_PD pdn {pdn}", self.name);
        Ok(Vec::new())
    }

    fn query_pkey(&self, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdQueryPkey = self.parse("QUERY_PKEY", body)?;
        self.check_port("QUERY_PKEY", req.port.get())?;
        let index = req.index.get();
        if u32::from(index) >= u32::from(limits::PKEY_TBL_LEN) {
            warn!(
                "{}: QUERY_PKEY: index {index} is past the P_Key table ({} entries)",
                self.name,
                limits::PKEY_TBL_LEN
            );
            return Err(VIRTIO_RDMA_S_INVALID);
        }
        let rsp = VirtioRdmaRspQueryPkey {
            pkey: U16::new(limits::DEFAULT_PKEY),
            reserved: [U16::new(0); 3],
        };
        Ok(rsp.as_bytes().to_vec())
    }

    fn check_gid_index(&self, cmd: &str, index: u16) -> Result<usize, u8> {
        if u32::from(index) >= limits::GID_TBL_LEN {
            warn!(
                "{}: {cmd}: GID index {index} is past the GID table ({} entries)",
                self.name,
                limits::GID_TBL_LEN
            );
            return Err(VIRTIO_RDMA_S_INVALID);
        }
        Ok(usize::from(index))
    }

    fn add_gid(&self, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdAddGid = self.parse("ADD_GID", body)?;
        let port = req.port_num.get();
        self.check_port("ADD_GID", port)?;
        let index = self.check_gid_index("ADD_GID", req.index.get())?;
        let gid_type = req.gid_type.get();
        if gid_type > MAX_GID_TYPE {
            warn!("{}: ADD_GID: unknown GID type {gid_type}", self.name);
            return Err(VIRTIO_RDMA_S_INVALID);
        }
        let entry = GidEntry {
            gid: req.gid,
            gid_type,
        };
        if !self.lock().gids.set(index, entry) {
            return Err(VIRTIO_RDMA_S_INVALID);
        }
        info!(
            "{}: ADD_GID port {port} index {index} gid {} type {gid_type}",
            self.name,
            Ipv6Addr::from(req.gid)
        );
        Ok(Vec::new())
    }

    fn del_gid(&self, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdDelGid = self.parse("DEL_GID", body)?;
        let port = req.port.get();
        self.check_port("DEL_GID", port)?;
        let index = self.check_gid_index("DEL_GID", req.index.get())?;
        match self.lock().gids.clear(index) {
            Some(old) => {
                info!(
                    "{}: DEL_GID port {port} index {index} gid {}",
                    self.name,
                    Ipv6Addr::from(old.gid)
                );
                Ok(Vec::new())
            }
            None => {
                warn!(
                    "{}: DEL_GID: port {port} index {index} holds no GID",
                    self.name
                );
                Err(VIRTIO_RDMA_S_NOT_FOUND)
            }
        }
    }

    /// The limits this device serves.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }
}
