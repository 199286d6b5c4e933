// SPDX-License-Identifier: GPL-2.0

//! The device-level verbs: device and port queries, the GID table and protection domains.
//!
//! Each verb that needs the device is one control command (`ctrl.rs`); what the device answers
//! is checked (`port.rs`) before the core sees it. The port's state and MTU follow the paired
//! netdev, which the RDMA core binds and unbinds as the interface comes and goes.

use core::num::NonZeroU32;

use kernel::{
    bindings,
    prelude::*,
    rdma::{
        self, CounterDesc, CqInitAttr, CqNotify, CqRegistry, Device, GidAttr, LinkLayer, MwType,
        NewCq, NewMr, NewMw, NewQp, NewSrq, PortNetdev, QpAttr, QpInitAttr, QpRegistry, RecvWrs,
        Rereg, ResAttrs, RoceAv, SendWrs, SrqAttr, SrqChange, SrqRegistry, SrqXrc, Udata,
        UserRange, WcSink, WorkQueue,
    },
};

use crate::{
    abi,
    ah::{self, DevAh},
    counter_sets,
    cq::{self, Cq},
    device::RdmaDev,
    mr::{self, Mr},
    mw::{self, Mw},
    port::{self, Link, Port},
    qp::{self, DevQp},
    srq::{self, DevSrq},
    ucontext, wqe,
    xrcd::{self, Xrcd},
};

/// The `ib_device_cap_flags` the driver implements (and so passes on when the device offers
/// them): fast registration, RNR NAKs, the system image GUID, windows, and ATOMIC WRITE and
/// FLUSH, which travel as work requests the device executes.
const DEVICE_CAP_FLAGS: u64 = (bindings::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS
    | bindings::ib_device_cap_flags_IB_DEVICE_RC_RNR_NAK_GEN
    | bindings::ib_device_cap_flags_IB_DEVICE_SYS_IMAGE_GUID
    | bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW
    | bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW_TYPE_2B
    | bindings::ib_device_cap_flags_IB_DEVICE_FLUSH_GLOBAL
    | bindings::ib_device_cap_flags_IB_DEVICE_FLUSH_PERSISTENT
    | bindings::ib_device_cap_flags_IB_DEVICE_ATOMIC_WRITE) as u64;

/// The driver's part of a protection domain: the device's handle for it.
pub(crate) struct Pd {
    pub(crate) pdn: u32,
}

impl RdmaDev<'_> {
    /// Asks the device about `port` and checks the answer.
    fn query_port_cmd(dev: &Device<Self>, port: u32) -> Result<Port> {
        let port_u8 = u8::try_from(port).map_err(|_| EINVAL)?;
        if port != rdma::FIRST_PORT {
            return Err(EINVAL);
        }
        let rsp: abi::RspQueryPort = dev.ctrl.exec(
            abi::cmd::QUERY_PORT,
            &abi::CmdQueryPort {
                port: port_u8,
                reserved: [0; 7],
            },
        )?;
        Port::check(&rsp).map_err(|e| {
            dev_err!(dev.as_ref(), "QUERY_PORT of port {}: {}\n", port, e);
            EPROTO
        })
    }
}

/// What the netdev bound to a port says about its link.
fn link_of(ndev: &PortNetdev) -> Link {
    Link {
        state: ndev.port_state(),
        roce_mtu: ndev.roce_mtu(),
    }
}

#[vtable]
impl rdma::Driver for RdmaDev<'_> {
    type OwnerModule = crate::LocalModule;

    const UVERBS_ABI_VERSION: u32 = abi::UVERBS_ABI_VERSION;

    type Ucontext = ucontext::UserContext;

    const PORT_COUNTERS: &'static [CounterDesc] = &port::COUNTERS;

    fn fill_res_qp(qp: &rdma::Qp<Self>, attrs: &mut ResAttrs<'_>) -> Result {
        qp.fill_res(attrs)
    }

    fn fill_res_cq(cq: &rdma::Cq<Self>, attrs: &mut ResAttrs<'_>) -> Result {
        cq.fill_res(attrs)
    }

    fn fill_res_mr(mr: &rdma::Mr<Self>, attrs: &mut ResAttrs<'_>) -> Result {
        mr.fill_res(attrs)
    }

    fn get_hw_stats(dev: &Device<Self>, port: u32, values: &mut [u64]) -> Result {
        counter_sets::query(dev, port, None, values)
    }

    fn counter_bind_qp(
        qp: &rdma::Qp<Self>,
        set: Option<NonZeroU32>,
        port: u32,
    ) -> Result<NonZeroU32> {
        counter_sets::bind(qp, set, port)
    }

    fn counter_unbind_qp(qp: &rdma::Qp<Self>, _set: NonZeroU32, _port: u32) -> Result {
        counter_sets::unbind(qp)
    }

    fn counter_dealloc(dev: &Device<Self>, set: NonZeroU32) -> Result {
        counter_sets::dealloc(dev, set)
    }

    fn counter_update_stats(
        dev: &Device<Self>,
        set: NonZeroU32,
        port: u32,
        values: &mut [u64],
    ) -> Result {
        counter_sets::query(dev, port, Some(set), values)
    }

    fn alloc_ucontext(dev: &Device<Self>, udata: &mut Udata<'_>) -> Result<Self::Ucontext> {
        ucontext::alloc(dev, udata)
    }
    type Pd = Pd;
    type Cq = Cq;
    type Mr = Mr;
    type Mw = Mw;
    type Qp = DevQp;
    type Ah = DevAh;

    fn query_device(dev: &Device<Self>, attr: &mut bindings::ib_device_attr) -> Result {
        let c = &dev.config.raw;
        attr.sys_image_guid = u64::from_ne_bytes(c.sys_image_guid.to_bytes());
        attr.max_mr_size = mr::max_mr_size(dev);
        attr.page_size_cap = c.page_size_cap.get();
        attr.vendor_id = c.vendor_id.get();
        attr.vendor_part_id = c.vendor_part_id.get();
        attr.hw_ver = c.hw_ver.get();
        // With rings in guest memory, only QPs and CQs with rings (and the GSI QP).
        attr.max_qp = dev.config.layout.usable_qp();
        attr.max_qp_wr = c.max_qp_wr.get();
        // Only the capabilities the driver implements too; the device may offer more.
        attr.device_cap_flags = c.device_cap_flags.get() & DEVICE_CAP_FLAGS;
        // XRC is offered by a config field (it needs SRQs), not by the device's flags.
        if xrcd::supported(dev) {
            attr.device_cap_flags |= bindings::ib_device_cap_flags_IB_DEVICE_XRC as u64;
        }
        // What a QP takes: the device's limits, within what an element holds.
        let qp_limits = qp::limits(dev);
        attr.max_send_sge = qp_limits.max_send_sge;
        attr.max_recv_sge = qp_limits.max_recv_sge;
        attr.max_sge_rd = c.max_sge_rd.get().min(wqe::MAX_SGE);
        attr.max_cq = dev.config.layout.usable_cq();
        attr.max_cqe = c.max_cqe.get();
        attr.max_mr = c.max_mr.get();
        attr.max_pd = c.max_pd.get();
        attr.max_qp_rd_atom = c.max_qp_rd_atom.get();
        attr.max_res_rd_atom = c.max_res_rd_atom.get();
        attr.max_qp_init_rd_atom = c.max_qp_init_rd_atom.get();
        // Checked by `config::validate`: an `enum ib_atomic_cap` value.
        attr.atomic_cap = u32::from(c.atomic_cap);
        // The driver has no memory windows, whatever the device offers.
        attr.max_mw = if mw::supported(dev) {
            c.max_mw.get()
        } else {
            0
        };
        (attr.max_srq, attr.max_srq_wr, attr.max_srq_sge) = srq::device_limits(dev);
        attr.max_mcast_grp = c.max_mcast_grp.get();
        attr.max_mcast_qp_attach = c.max_mcast_qp_attach.get();
        attr.max_total_mcast_qp_attach = c.max_total_mcast_qp_attach.get();
        attr.max_ah = c.max_ah.get();
        attr.max_fast_reg_page_list_len = c.max_fast_reg_page_list_len.get();
        attr.max_pi_fast_reg_page_list_len = c.max_pi_fast_reg_page_list_len.get();
        attr.max_pkeys = c.max_pkeys.get();
        attr.local_ca_ack_delay = c.local_ca_ack_delay;
        Ok(())
    }

    fn query_port(dev: &Device<Self>, port: u32, attr: &mut bindings::ib_port_attr) -> Result {
        let answer = Self::query_port_cmd(dev, port)?;
        let ndev = dev.port_netdev(port);
        let link = ndev.as_ref().map(link_of);
        let speed = ndev.as_ref().and_then(|_| dev.eth_speed(port).ok());
        answer.fill_attr(link.as_ref(), speed, attr);
        Ok(())
    }

    fn get_port_immutable(
        dev: &Device<Self>,
        port: u32,
        immutable: &mut bindings::ib_port_immutable,
    ) -> Result {
        Self::query_port_cmd(dev, port)?.fill_immutable(immutable);
        Ok(())
    }

    fn get_link_layer(_dev: &Device<Self>, _port: u32) -> LinkLayer {
        LinkLayer::Ethernet
    }

    fn query_pkey(dev: &Device<Self>, port: u32, index: u16) -> Result<u16> {
        let rsp: abi::RspQueryPkey = dev.ctrl.exec(
            abi::cmd::QUERY_PKEY,
            &abi::CmdQueryPkey {
                port: port.into(),
                index: index.into(),
                reserved: 0.into(),
            },
        )?;
        Ok(rsp.pkey.get())
    }

    fn add_gid(dev: &Device<Self>, attr: &GidAttr) -> Result {
        let cmd = port::add_gid_cmd(attr.port(), attr.index(), attr.gid(), attr.gid_type());
        dev.ctrl
            .exec::<_, ()>(abi::cmd::ADD_GID, &cmd)
            .inspect_err(|e| {
                dev_warn!(
                    dev.as_ref(),
                    "ADD_GID port {} index {}: {:?}\n",
                    attr.port(),
                    attr.index(),
                    e
                )
            })
    }

    fn del_gid(dev: &Device<Self>, attr: &GidAttr) -> Result {
        let cmd = port::del_gid_cmd(attr.port(), attr.index());
        dev.ctrl
            .exec::<_, ()>(abi::cmd::DEL_GID, &cmd)
            .inspect_err(|e| {
                dev_warn!(
                    dev.as_ref(),
                    "DEL_GID port {} index {}: {:?}\n",
                    attr.port(),
                    attr.index(),
                    e
                )
            })
    }

    fn alloc_pd(dev: &Device<Self>) -> Result<Pd> {
        dev.health.check()?;
        let rsp: abi::RspCreatePd = dev.ctrl.exec(abi::cmd::CREATE_PD, &())?;
        let pdn = rsp.pdn.get();
        if pdn == 0 {
            dev_err!(dev.as_ref(), "CREATE_PD returned handle 0\n");
            return Err(EPROTO);
        }
        Ok(Pd { pdn })
    }

    fn dealloc_pd(dev: &Device<Self>, pd: Pd) {
        let cmd = abi::CmdDestroyPd {
            pdn: pd.pdn.into(),
            reserved: 0.into(),
        };
        if let Err(e) = dev.ctrl.exec::<_, ()>(abi::cmd::DESTROY_PD, &cmd) {
            dev_err!(dev.as_ref(), "DESTROY_PD {}: {:?}\n", pd.pdn, e);
        }
    }

    fn cq_registry<'d>(dev: &'d Device<Self>) -> &'d CqRegistry<Self> {
        &dev.ctrl.queues().handler().get_ref().cqs
    }

    fn create_cq(
        dev: &Device<Self>,
        attr: &CqInitAttr,
        user: Option<(&rdma::Ucontext<Self>, &mut Udata<'_>)>,
    ) -> Result<NewCq<Cq>> {
        dev.health.check()?;
        cq::create(dev, attr, user)
    }

    fn destroy_cq(dev: &Device<Self>, cq: &rdma::Cq<Self>) {
        cq::destroy(dev, cq)
    }

    fn resize_user_cq(
        cq: &rdma::Cq<Self>,
        uctx: &rdma::Ucontext<Self>,
        cqe: u32,
        udata: &mut Udata<'_>,
    ) -> Result<u32> {
        cq.device().health.check()?;
        cq::resize_user(cq, uctx, cqe, udata)
    }

    fn poll_cq(cq: &rdma::Cq<Self>, sink: &mut WcSink<'_, Self>) -> Result {
        cq::poll(cq, sink)
    }

    fn req_notify_cq(cq: &rdma::Cq<Self>, flags: CqNotify) -> Result<bool> {
        cq::req_notify(cq, flags)
    }

    fn get_dma_mr(pd: &rdma::Pd<Self>, access: u32) -> Result<NewMr<Mr>> {
        pd.device().health.check()?;
        mr::get_dma(pd.device(), pd.pdn, access)
    }

    fn reg_user_mr(
        pd: &rdma::Pd<Self>,
        start: u64,
        length: u64,
        virt_addr: u64,
        access: u32,
    ) -> Result<NewMr<Mr>> {
        pd.device().health.check()?;
        mr::reg_user(pd.device(), pd.pdn, start, length, virt_addr, access)
    }

    fn rereg_user_mr(
        mr: &rdma::Mr<Self>,
        pd: &rdma::Pd<Self>,
        trans: Option<UserRange>,
        access: Option<u32>,
    ) -> Result<Rereg<Mr>> {
        pd.device().health.check()?;
        mr::rereg_user(pd.device(), mr, pd.pdn, trans, access)
    }

    fn dereg_mr(dev: &Device<Self>, mr: Mr) -> core::result::Result<(), (Error, Mr)> {
        mr::dereg(dev, mr)
    }

    fn alloc_mw(pd: &rdma::Pd<Self>, mw_type: MwType) -> Result<NewMw<Mw>> {
        pd.device().health.check()?;
        mw::alloc(pd.device(), pd.pdn, mw_type)
    }

    fn dealloc_mw(dev: &Device<Self>, mw: Mw) {
        mw::dealloc(dev, mw)
    }

    type Srq = DevSrq;

    fn srq_registry<'d>(dev: &'d Device<Self>) -> &'d SrqRegistry<Self> {
        &dev.ctrl.queues().handler().get_ref().srqs
    }

    fn create_srq(
        pd: &rdma::Pd<Self>,
        attr: &SrqAttr,
        xrc: Option<SrqXrc<'_, Self>>,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<NewSrq<DevSrq>> {
        srq::create(pd, attr, xrc, udata)
    }

    fn destroy_srq(srq: &rdma::Srq<Self>) -> Result {
        srq::destroy(srq)
    }

    fn modify_srq(srq: &rdma::Srq<Self>, change: &SrqChange) -> Result {
        srq::modify(srq, change)
    }

    fn query_srq(srq: &rdma::Srq<Self>) -> Result<SrqAttr> {
        srq::query(srq)
    }

    fn post_srq_recv(srq: &rdma::Srq<Self>, wrs: &mut RecvWrs<'_>) -> Result {
        srq::post_recv(srq, wrs)
    }

    fn ring_srq_doorbell(srq: &rdma::Srq<Self>) -> Result {
        srq::ring_doorbell(srq)
    }

    fn qp_registry<'d>(dev: &'d Device<Self>) -> &'d QpRegistry<Self> {
        &dev.ctrl.queues().handler().get_ref().qps
    }

    fn create_qp(
        pd: &rdma::Pd<Self>,
        attr: &QpInitAttr,
        send_cq: &rdma::Cq<Self>,
        recv_cq: Option<&rdma::Cq<Self>>,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<NewQp<DevQp>> {
        pd.device().health.check()?;
        qp::create(pd, attr, send_cq, recv_cq, udata)
    }

    type Xrcd = Xrcd;

    fn alloc_xrcd(dev: &Device<Self>) -> Result<Xrcd> {
        xrcd::alloc(dev)
    }

    fn dealloc_xrcd(dev: &Device<Self>, xrcd: Xrcd) {
        xrcd::dealloc(dev, xrcd)
    }

    fn create_xrc_tgt_qp(xrcd: &rdma::Xrcd<Self>, attr: &QpInitAttr) -> Result<NewQp<DevQp>> {
        xrcd.device().health.check()?;
        qp::create_xrc_tgt(xrcd, attr)
    }

    fn destroy_qp(qp: &rdma::Qp<Self>) {
        qp::destroy(qp)
    }

    fn modify_qp(qp: &rdma::Qp<Self>, attr: &QpAttr, mask: u32) -> Result {
        qp::modify(qp, attr, mask)
    }

    fn query_qp(
        qp: &rdma::Qp<Self>,
        attr: &mut bindings::ib_qp_attr,
        init: &mut bindings::ib_qp_init_attr,
    ) -> Result {
        qp::query(qp, attr, init)
    }

    fn post_send(qp: &rdma::Qp<Self>, wrs: &mut SendWrs<'_, Self>) -> Result {
        qp::post_send(qp, wrs)
    }

    fn post_recv(qp: &rdma::Qp<Self>, wrs: &mut RecvWrs<'_>) -> Result {
        qp::post_recv(qp, wrs)
    }

    fn ring_doorbell(qp: &rdma::Qp<Self>, wq: WorkQueue) -> Result {
        qp::ring_doorbell(qp, wq)
    }

    fn create_ah(
        _pd: &rdma::Pd<Self>,
        av: &RoceAv,
        _sleepable: bool,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<DevAh> {
        ah::create(av, udata)
    }

    fn alloc_mr(pd: &rdma::Pd<Self>, max_num_sg: u32) -> Result<NewMr<Mr>> {
        pd.device().health.check()?;
        mr::alloc(pd.device(), pd.pdn, max_num_sg)
    }

    fn map_mr_sg_start(mr: &rdma::Mr<Self>) -> Result {
        mr::map_start(mr)
    }

    fn mr_set_page(mr: &rdma::Mr<Self>, addr: u64) -> Result {
        mr::set_page(mr, addr)
    }
}
