// SPDX-License-Identifier: GPL-2.0

//! Address handles. They live in the guest only: every UD send element carries its address
//! vector, so creating one needs no control command and works in atomic context. A process's
//! AH answers its provider with that address vector, which the provider copies into the UD
//! send elements it writes.

use kernel::{
    prelude::*,
    rdma::{RoceAv, Udata},
};
use zerocopy::IntoBytes;

use crate::abi;

/// The driver's part of an AH: the address vector as the device reads it.
pub(crate) struct DevAh {
    pub(crate) av: abi::Av,
}

/// The device's form of a RoCE address vector; [`EINVAL`] for a port other than 1.
pub(crate) fn wire_av(av: &RoceAv) -> Result<abi::Av> {
    if av.port_num != kernel::rdma::FIRST_PORT {
        return Err(EINVAL);
    }
    Ok(abi::Av {
        dgid: av.dgid,
        flow_label: av.flow_label.into(),
        sgid_index: av.sgid_index,
        hop_limit: av.hop_limit,
        traffic_class: av.traffic_class,
        sl: av.sl,
        dmac: av.dmac,
        static_rate: av.static_rate,
        port_num: kernel::rdma::FIRST_PORT as u8,
    })
}

/// The address vector the device reports (a QP's primary path), checked: `None` when it has
/// none (port 0), `EIO` when it names a port the device does not have.
pub(crate) fn from_wire(av: &abi::Av) -> Result<Option<RoceAv>> {
    match u32::from(av.port_num) {
        0 => Ok(None),
        kernel::rdma::FIRST_PORT => Ok(Some(RoceAv {
            dgid: av.dgid,
            flow_label: av.flow_label.get(),
            sgid_index: av.sgid_index,
            hop_limit: av.hop_limit,
            traffic_class: av.traffic_class,
            sl: av.sl,
            static_rate: av.static_rate,
            port_num: kernel::rdma::FIRST_PORT,
            dmac: av.dmac,
        })),
        _ => Err(EIO),
    }
}

/// Creates an AH (any context, except with `udata`: a user verb).
pub(crate) fn create(av: &RoceAv, udata: Option<&mut Udata<'_>>) -> Result<DevAh> {
    let av = wire_av(av)?;
    if let Some(udata) = udata {
        // No request data is defined.
        udata.read_request(&mut [])?;
        udata.write_response(abi::CreateAhResp { av }.as_bytes())?;
    }
    Ok(DevAh { av })
}

#[kunit_tests(virtio_rdma_ah)]
mod tests {
    use super::*;

    #[test]
    fn address_vectors_on_the_wire() {
        let mut dgid = [0u8; 16];
        dgid[0] = 0xfe;
        dgid[1] = 0x80;
        let av = RoceAv {
            dgid,
            flow_label: 0x12345,
            sgid_index: 3,
            hop_limit: 64,
            traffic_class: 0x10,
            sl: 2,
            static_rate: 0,
            port_num: 1,
            dmac: [0x52, 0x54, 0, 0x12, 0x34, 0x56],
        };
        let wire = wire_av(&av);
        assert!(wire.is_ok());
        let Ok(wire) = wire else { return };
        let b = wire.as_bytes();
        assert_eq!(b.len(), 32);
        assert_eq!(&b[0..2], &[0xfe, 0x80]);
        assert_eq!(&b[16..20], &0x12345u32.to_le_bytes());
        assert_eq!(&b[20..24], &[3, 64, 0x10, 2]);
        assert_eq!(&b[24..30], &[0x52, 0x54, 0, 0x12, 0x34, 0x56]);
        assert_eq!(b[31], 1);
        assert_eq!(wire_av(&RoceAv { port_num: 2, ..av }).err(), Some(EINVAL));
    }
}
