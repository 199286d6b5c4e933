// SPDX-License-Identifier: GPL-2.0

//! The RoCE port: checking what the device says about it, combining that with the link of the
//! paired netdev, encoding GID table changes for the device, and naming its counters.
//!
//! Everything here is pure so that KUnit can test it; `verbs.rs` does the I/O.

use kernel::{bindings, fmt, prelude::*, rdma::CounterDesc};

use crate::abi::{counter, CmdAddGid, CmdDelGid, RspQueryPort};

/// Largest GID table the driver accepts (the RDMA core allocates an entry per slot).
pub(crate) const MAX_GID_TBL_LEN: u32 = 1024;
/// Largest P_Key table the driver accepts (RoCE uses one entry).
pub(crate) const MAX_PKEY_TBL_LEN: u16 = 128;
/// Size of a management datagram (`IB_MGMT_MAD_SIZE` of `<rdma/ib_mad.h>`): RoCE ports carry
/// IB MADs only, no OPA ones.
pub(crate) const MGMT_MAD_SIZE: u32 = 256;

const MTU_256: u8 = bindings::ib_mtu_IB_MTU_256 as u8;
const MTU_4096: u8 = bindings::ib_mtu_IB_MTU_4096 as u8;
const PORT_ACTIVE: u8 = bindings::ib_port_state_IB_PORT_ACTIVE as u8;

/// The port's hardware counters in `enum virtio_rdma_counter` order (QUERY_COUNTERS answers
/// them in that order), as `rdma statistic` shows them.
pub(crate) const COUNTERS: [CounterDesc; counter::NUM] = [
    CounterDesc::new(c"sent_pkts"),
    CounterDesc::new(c"sent_bytes"),
    CounterDesc::new(c"rcvd_pkts"),
    CounterDesc::new(c"rcvd_bytes"),
    CounterDesc::new(c"rnr_naks_sent"),
    CounterDesc::new(c"rnr_naks_rcvd"),
    CounterDesc::new(c"dropped_not_peer"),
    CounterDesc::new(c"dropped_bad_psn"),
    CounterDesc::new(c"dropped_bad_qkey"),
    CounterDesc::new(c"loc_len_err"),
    CounterDesc::new(c"loc_qp_op_err"),
    CounterDesc::new(c"loc_prot_err"),
    CounterDesc::new(c"wr_flush_err"),
    CounterDesc::new(c"rem_inv_req_err"),
    CounterDesc::new(c"rem_access_err"),
    CounterDesc::new(c"rem_op_err"),
    CounterDesc::new(c"retry_exc_err"),
    CounterDesc::new(c"rnr_retry_exc_err"),
    CounterDesc::new(c"other_err"),
];

/// What is wrong with a QUERY_PORT answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PortError {
    /// `max_mtu` is not an `enum ib_mtu` value.
    MaxMtu(u8),
    /// `gid_tbl_len` is outside `1..=MAX_GID_TBL_LEN`.
    GidTblLen(u32),
    /// `pkey_tbl_len` is outside `1..=MAX_PKEY_TBL_LEN`.
    PkeyTblLen(u16),
}

impl fmt::Display for PortError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::MaxMtu(v) => write!(f, "max_mtu {v} is not an IB MTU ({MTU_256}..={MTU_4096})"),
            Self::GidTblLen(n) => write!(f, "gid_tbl_len {n}, must be 1..={MAX_GID_TBL_LEN}"),
            Self::PkeyTblLen(n) => write!(f, "pkey_tbl_len {n}, must be 1..={MAX_PKEY_TBL_LEN}"),
        }
    }
}

/// A QUERY_PORT answer whose table sizes and MTU were checked.
#[derive(Clone, Copy)]
pub(crate) struct Port(RspQueryPort);

impl Port {
    /// Checks the device's answer to QUERY_PORT.
    pub(crate) fn check(rsp: &RspQueryPort) -> Result<Self, PortError> {
        if !(MTU_256..=MTU_4096).contains(&rsp.max_mtu) {
            return Err(PortError::MaxMtu(rsp.max_mtu));
        }
        let gids = rsp.gid_tbl_len.get();
        if !(1..=MAX_GID_TBL_LEN).contains(&gids) {
            return Err(PortError::GidTblLen(gids));
        }
        let pkeys = rsp.pkey_tbl_len.get();
        if !(1..=MAX_PKEY_TBL_LEN).contains(&pkeys) {
            return Err(PortError::PkeyTblLen(pkeys));
        }
        Ok(Self(*rsp))
    }

    /// Fills in the attributes that never change.
    pub(crate) fn fill_immutable(&self, imm: &mut bindings::ib_port_immutable) {
        imm.pkey_tbl_len = i32::from(self.0.pkey_tbl_len.get());
        // At most `MAX_GID_TBL_LEN` (checked).
        imm.gid_tbl_len = self.0.gid_tbl_len.get() as i32;
        imm.core_cap_flags = bindings::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
        imm.max_mad_size = MGMT_MAD_SIZE;
    }

    /// Fills in `attr` (zeroed by the core) from the device's answer and the link of the paired
    /// netdev (`None` while the port has no netdev). The port is active only if the device
    /// says so and the netdev is up with a carrier; its MTU is what fits the netdev's MTU.
    pub(crate) fn fill_attr(
        &self,
        link: Option<&Link>,
        speed: Option<(u16, u8)>,
        attr: &mut bindings::ib_port_attr,
    ) {
        let r = &self.0;
        let up = r.state == PORT_ACTIVE
            && link.is_some_and(|l| l.state == bindings::ib_port_state_IB_PORT_ACTIVE);
        if up {
            attr.state = bindings::ib_port_state_IB_PORT_ACTIVE;
            attr.phys_state = bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP as u8;
        } else {
            attr.state = bindings::ib_port_state_IB_PORT_DOWN;
            attr.phys_state = bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED as u8;
        }
        let max_mtu = u32::from(r.max_mtu);
        attr.max_mtu = max_mtu;
        attr.active_mtu = match link {
            Some(l) => l.roce_mtu.clamp(u32::from(MTU_256), max_mtu),
            None => u32::from(r.active_mtu).clamp(u32::from(MTU_256), max_mtu),
        };
        attr.phys_mtu = r.phys_mtu.get();
        attr.gid_tbl_len = r.gid_tbl_len.get() as i32;
        attr.port_cap_flags = r.port_cap_flags.get();
        attr.max_msg_sz = r.max_msg_sz.get();
        attr.bad_pkey_cntr = r.bad_pkey_cntr.get();
        attr.qkey_viol_cntr = r.qkey_viol_cntr.get();
        attr.pkey_tbl_len = r.pkey_tbl_len.get();
        let (speed, width) = speed.unwrap_or((r.active_speed.get(), r.active_width));
        attr.active_speed = speed;
        attr.active_width = width;
    }
}

/// The link of the paired netdev, as far as the port is concerned.
pub(crate) struct Link {
    /// `IB_PORT_ACTIVE` if the netdev is up with a carrier, `IB_PORT_DOWN` otherwise.
    pub(crate) state: bindings::ib_port_state,
    /// The RoCE MTU (`enum ib_mtu`) that fits the netdev's MTU.
    pub(crate) roce_mtu: bindings::ib_mtu,
}

/// The node GUID of a RoCE device: the modified EUI-64 of its MAC, in network byte order (as
/// `ib_device.node_guid` holds it).
pub(crate) fn node_guid(mac: [u8; 6]) -> u64 {
    u64::from_ne_bytes([
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ])
}

/// The ADD_GID command for GID table entry `index` of `port`.
pub(crate) fn add_gid_cmd(port: u32, index: u16, gid: [u8; 16], gid_type: u32) -> CmdAddGid {
    CmdAddGid {
        gid,
        gid_type: gid_type.into(),
        index: index.into(),
        reserved0: 0.into(),
        port_num: port.into(),
        reserved1: 0.into(),
    }
}

/// The DEL_GID command for GID table entry `index` of `port`.
pub(crate) fn del_gid_cmd(port: u32, index: u16) -> CmdDelGid {
    CmdDelGid {
        index: index.into(),
        reserved: 0.into(),
        port: port.into(),
    }
}

#[kunit_tests(virtio_rdma_port)]
mod tests {
    use super::*;
    use zerocopy::FromZeros;

    #[test]
    fn counters_are_named_in_protocol_order() {
        let name = |i: usize| COUNTERS[i].name().to_bytes();
        assert_eq!(name(counter::SENT_PKTS), b"sent_pkts");
        assert_eq!(name(counter::RCVD_BYTES), b"rcvd_bytes");
        assert_eq!(name(counter::DROPPED_NOT_PEER), b"dropped_not_peer");
        assert_eq!(name(counter::LOC_LEN_ERR), b"loc_len_err");
        assert_eq!(name(counter::REM_ACCESS_ERR), b"rem_access_err");
        assert_eq!(name(counter::OTHER_ERR), b"other_err");
        for i in 0..COUNTERS.len() {
            for j in 0..i {
                assert_ne!(name(i), name(j));
            }
        }
    }

    /// What the reference backend answers for its port.
    fn rsp() -> RspQueryPort {
        let mut r = RspQueryPort::new_zeroed();
        r.state = PORT_ACTIVE;
        r.max_mtu = MTU_4096;
        r.active_mtu = MTU_4096;
        r.phys_state = 5;
        r.phys_mtu.set(4096);
        r.gid_tbl_len.set(128);
        r.port_cap_flags.set(1 << 16);
        r.max_msg_sz.set(1 << 30);
        r.pkey_tbl_len.set(1);
        r.active_width = 1;
        r
    }

    fn up(mtu: bindings::ib_mtu) -> Link {
        Link {
            state: bindings::ib_port_state_IB_PORT_ACTIVE,
            roce_mtu: mtu,
        }
    }

    #[test]
    fn checks_the_device_answer() {
        assert!(Port::check(&rsp()).is_ok());
        let mut r = rsp();
        r.max_mtu = 0;
        assert_eq!(Port::check(&r).err(), Some(PortError::MaxMtu(0)));
        r.max_mtu = 6;
        assert_eq!(Port::check(&r).err(), Some(PortError::MaxMtu(6)));
        let mut r = rsp();
        r.gid_tbl_len.set(0);
        assert_eq!(Port::check(&r).err(), Some(PortError::GidTblLen(0)));
        r.gid_tbl_len.set(u32::MAX);
        assert_eq!(Port::check(&r).err(), Some(PortError::GidTblLen(u32::MAX)));
        let mut r = rsp();
        r.pkey_tbl_len.set(0);
        assert_eq!(Port::check(&r).err(), Some(PortError::PkeyTblLen(0)));
        r.pkey_tbl_len.set(129);
        assert_eq!(Port::check(&r).err(), Some(PortError::PkeyTblLen(129)));
    }

    #[test]
    fn port_follows_the_netdev_link() {
        let Ok(port) = Port::check(&rsp()) else {
            panic!("reference answer refused");
        };
        let mut attr = bindings::ib_port_attr::default();
        // Up, MTU 1500: RoCE MTU 1024.
        port.fill_attr(Some(&up(bindings::ib_mtu_IB_MTU_1024)), None, &mut attr);
        assert_eq!(attr.state, bindings::ib_port_state_IB_PORT_ACTIVE);
        assert_eq!(
            u32::from(attr.phys_state),
            bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP
        );
        assert_eq!(attr.active_mtu, bindings::ib_mtu_IB_MTU_1024);
        assert_eq!(attr.max_mtu, bindings::ib_mtu_IB_MTU_4096);
        assert_eq!(attr.gid_tbl_len, 128);
        assert_eq!(attr.pkey_tbl_len, 1);
        // Netdev down, or no netdev at all: the port is down.
        let down = Link {
            state: bindings::ib_port_state_IB_PORT_DOWN,
            roce_mtu: bindings::ib_mtu_IB_MTU_1024,
        };
        port.fill_attr(Some(&down), None, &mut attr);
        assert_eq!(attr.state, bindings::ib_port_state_IB_PORT_DOWN);
        assert_eq!(
            u32::from(attr.phys_state),
            bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED
        );
        port.fill_attr(None, None, &mut attr);
        assert_eq!(attr.state, bindings::ib_port_state_IB_PORT_DOWN);
        // The device's own link down wins over an up netdev.
        let mut r = rsp();
        r.state = bindings::ib_port_state_IB_PORT_DOWN as u8;
        let Ok(port_down) = Port::check(&r) else {
            panic!("answer refused");
        };
        port_down.fill_attr(Some(&up(bindings::ib_mtu_IB_MTU_1024)), None, &mut attr);
        assert_eq!(attr.state, bindings::ib_port_state_IB_PORT_DOWN);
        // A jumbo netdev MTU is capped by the device's max_mtu; speed comes from the netdev.
        let mut r = rsp();
        r.max_mtu = bindings::ib_mtu_IB_MTU_2048 as u8;
        let Ok(port) = Port::check(&r) else {
            panic!("answer refused");
        };
        port.fill_attr(
            Some(&up(bindings::ib_mtu_IB_MTU_4096)),
            Some((2, 4)),
            &mut attr,
        );
        assert_eq!(attr.active_mtu, bindings::ib_mtu_IB_MTU_2048);
        assert_eq!(attr.active_speed, 2);
        assert_eq!(attr.active_width, 4);
    }

    #[test]
    fn immutable_attributes_are_roce_v2() {
        let Ok(port) = Port::check(&rsp()) else {
            panic!("reference answer refused");
        };
        let mut imm = bindings::ib_port_immutable::default();
        port.fill_immutable(&mut imm);
        assert_eq!(
            imm.core_cap_flags,
            bindings::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP
        );
        assert_eq!(imm.gid_tbl_len, 128);
        assert_eq!(imm.pkey_tbl_len, 1);
        assert_eq!(imm.max_mad_size, 256);
    }

    #[test]
    fn node_guid_is_the_mac_eui64() {
        let guid = node_guid([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
        assert_eq!(
            guid.to_ne_bytes(),
            [0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56]
        );
    }

    #[test]
    fn gid_commands_are_encoded_little_endian() {
        let mut gid = [0u8; 16];
        gid[0] = 0xfe;
        gid[1] = 0x80;
        gid[15] = 0x56;
        let cmd = add_gid_cmd(1, 3, gid, 2);
        let b = cmd.as_bytes();
        assert_eq!(b.len(), 32);
        assert_eq!(&b[..16], &gid);
        assert_eq!(&b[16..20], &[2, 0, 0, 0]);
        assert_eq!(&b[20..22], &[3, 0]);
        assert_eq!(&b[24..28], &[1, 0, 0, 0]);
        let del = del_gid_cmd(1, 0x102);
        assert_eq!(del.as_bytes(), &[2, 1, 0, 0, 1, 0, 0, 0]);
    }
}
