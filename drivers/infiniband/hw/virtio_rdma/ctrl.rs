// SPDX-License-Identifier: GPL-2.0

//! The control virtqueue: one command at a time, the caller sleeping until the device answers.
//!
//! A command is the request header ([`CtrlHdr`]) and the request body, which the device reads,
//! followed by room for the response header ([`CtrlRspHdr`]) and the response body, which the
//! device writes. Commands are serialised by a mutex and use one preallocated buffer; the
//! caller sleeps on a condition variable that the control queue's callback (hard-IRQ context)
//! signals when the device gives the buffer back; a signal to the caller does not end the wait
//! (a command the device may still be executing cannot be abandoned), only a timeout does, or
//! the device stopping (it needs a reset, `health.rs`): a stopped device runs no command, so
//! commands then end at once without being sent, with [`stopped_result`]. The used length and
//! the status the device reports are validated before the response is believed.

use core::sync::atomic::{AtomicBool, Ordering};

use kernel::{
    device, new_condvar, new_mutex,
    prelude::*,
    sync::{new_spinlock_irq, CondVar, CondVarTimeoutResult, Mutex, SpinLockIrq},
    time::{delay::fsleep, msecs_to_jiffies, Delta, Instant, Monotonic},
    virtio::{Virtqueue, Virtqueues, VqHandler},
};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes};
use zerocopy_derive::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::{
    abi::{self, status, CtrlHdr, CtrlRspHdr},
    queues::Handler,
};

/// Size of the control buffer: the largest request plus the largest response of any command.
const CTRL_BUF_SIZE: usize = 512;

/// How long a command may take before the driver gives up on it.
const CMD_TIMEOUT_MS: u32 = 30_000;

/// The buffer every control command travels in (kmalloc memory, lent to the device).
#[repr(C)]
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CtrlBuf {
    bytes: [u8; CTRL_BUF_SIZE],
}

impl CtrlBuf {
    /// Writes command `cmd` with request body `req` (`out_len` bytes with the header, from
    /// [`command_lengths`]) and clears the rest.
    fn encode(&mut self, cmd: u32, req: &[u8], out_len: usize) {
        let hdr = CtrlHdr {
            cmd: cmd.into(),
            reserved: 0.into(),
        };
        let hdr_len = core::mem::size_of::<CtrlHdr>();
        self.bytes.fill(0);
        self.bytes[..hdr_len].copy_from_slice(hdr.as_bytes());
        self.bytes[hdr_len..out_len].copy_from_slice(req);
    }

    /// Reads the response the device wrote (`used` bytes into the `in_len` after `out_len`),
    /// once checked.
    fn decode<Rsp: FromBytes>(&self, used: u32, out_len: usize, in_len: usize) -> Result<Rsp> {
        let rsp_len = core::mem::size_of::<Rsp>();
        let resp = &self.bytes[out_len..out_len + in_len];
        check_response(resp, used, in_len, rsp_len)?;
        Rsp::read_from_bytes(&resp[core::mem::size_of::<CtrlRspHdr>()..][..rsp_len])
            .map_err(|_| EPROTO)
    }
}

/// The handler of a control queue borrowed before its device's layout is known: the commands on
/// it poll ([`exec_polled`]), so no callback is needed.
pub(crate) struct Polled;

impl VqHandler for Polled {
    fn callback(&self, _vq: &Virtqueue) {}
}

/// Runs command `cmd` with request body `req` on control queue `vq`, polling for the answer: how
/// the RoCE half of a virtio-net device starts (RESET, QUERY_DEVICE) before it knows its queue
/// layout. A command the device does not answer in time leaves its buffer lent to it.
pub(crate) fn exec_polled<Req, Rsp>(
    dev: &device::Device,
    vq: &Virtqueue,
    cmd: u32,
    req: &Req,
) -> Result<Rsp>
where
    Req: IntoBytes + Immutable,
    Rsp: FromBytes,
{
    let req = req.as_bytes();
    let (out_len, in_len) =
        command_lengths(req.len(), core::mem::size_of::<Rsp>()).ok_or(EINVAL)?;
    let mut buf = KBox::new(CtrlBuf::new_zeroed(), GFP_KERNEL)?;
    buf.encode(cmd, req, out_len);
    let mut q = vq.lock::<CtrlBuf>()?;
    q.add(buf, out_len, in_len).map_err(|(e, _)| e)?;
    let notify = q.kick_prepare();
    drop(q);
    if notify {
        vq.notify();
    }
    for _ in 0..CMD_TIMEOUT_MS {
        if let Some((buf, used)) = vq.lock::<CtrlBuf>()?.get_buf() {
            let rsp = buf.decode(used, out_len, in_len);
            if rsp.as_ref().err() == Some(&EPROTO) {
                dev_err!(dev, "control command {}: malformed response\n", cmd);
            }
            return rsp;
        }
        fsleep(Delta::from_millis(1));
    }
    dev_err!(dev, "control command {} timed out\n", cmd);
    Err(ETIMEDOUT)
}

/// A command's device-readable and device-writable sizes; `None` if it does not fit the buffer.
pub(crate) fn command_lengths(req_len: usize, rsp_len: usize) -> Option<(usize, usize)> {
    let out = core::mem::size_of::<CtrlHdr>().checked_add(req_len)?;
    let inn = core::mem::size_of::<CtrlRspHdr>().checked_add(rsp_len)?;
    (out.checked_add(inn)? <= CTRL_BUF_SIZE).then_some((out, inn))
}

/// Whether a command that failed with `err` may still have been carried out: it timed out, or
/// the device's answer was malformed. Otherwise the device refused it, or it was never sent.
pub(crate) fn may_be_done(err: Error) -> bool {
    err == ETIMEDOUT || err == EPROTO
}

/// Maps a device status to the command's result.
pub(crate) fn status_to_result(st: u8) -> Result {
    match st {
        status::OK => Ok(()),
        status::UNSUPPORTED => Err(EOPNOTSUPP),
        status::INVALID => Err(EINVAL),
        status::NO_RESOURCE => Err(ENOMEM),
        status::NOT_FOUND => Err(ENOENT),
        status::BUSY => Err(EBUSY),
        status::FAULT => Err(EFAULT),
        status::BAD_STATE => Err(EINVAL),
        _ => Err(EIO),
    }
}

/// Whether command `cmd` releases an object of the device (or a GID it was told of).
pub(crate) fn releases(cmd: u32) -> bool {
    use abi::cmd::*;
    matches!(
        cmd,
        DESTROY_PD
            | DESTROY_CQ
            | DEREG_MR
            | DEALLOC_MW
            | DESTROY_QP
            | DESTROY_SRQ
            | DEALLOC_XRCD
            | DEL_GID
            | DEALLOC_COUNTER_SET
    )
}

/// The result of command `cmd` on a stopped device, which holds no object any more: a command
/// that releases one succeeds (with a zeroed response), the others fail with [`EIO`].
pub(crate) fn stopped_result<Rsp: FromBytes>(cmd: u32) -> Result<Rsp> {
    if releases(cmd) {
        Ok(Rsp::new_zeroed())
    } else {
        Err(EIO)
    }
}

/// Checks a response: `used` bytes written by the device into `in_len` bytes of room, of which
/// `rsp_len` are the response body. Returns the status, or `EPROTO` if the device broke the
/// protocol.
pub(crate) fn check_response(resp: &[u8], used: u32, in_len: usize, rsp_len: usize) -> Result {
    let used = usize::try_from(used).map_err(|_| EPROTO)?;
    let hdr_len = core::mem::size_of::<CtrlRspHdr>();
    if used < hdr_len || used > in_len || resp.len() < in_len {
        return Err(EPROTO);
    }
    let (hdr, _) = CtrlRspHdr::read_from_prefix(resp).map_err(|_| EPROTO)?;
    status_to_result(hdr.status)?;
    if used < hdr_len + rsp_len {
        return Err(EPROTO);
    }
    Ok(())
}

/// The answer the control queue's callback hands to the waiting command.
struct Done {
    buf: Option<(KBox<CtrlBuf>, u32)>,
}

/// Where the control queue's callback (hard-IRQ context) leaves the command buffer the device
/// gave back, and wakes the command waiting for it.
#[pin_data]
pub(crate) struct CtrlDone {
    #[pin]
    done: SpinLockIrq<Done>,
    #[pin]
    wait: CondVar,
    /// The device stopped: it answers no command.
    stopped: AtomicBool,
}

impl CtrlDone {
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            done <- new_spinlock_irq!(Done { buf: None }, "virtio_rdma_ctrl_done"),
            wait <- new_condvar!("virtio_rdma_ctrl_wait"),
            stopped: AtomicBool::new(false),
        })
    }

    fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// Takes the buffer the device gave back, if any.
    fn take_done(&self) -> Option<(KBox<CtrlBuf>, u32)> {
        self.done.lock().buf.take()
    }

    /// The control queue's callback: collects the used buffer and wakes the command.
    pub(crate) fn used(&self, vq: &Virtqueue) {
        let Ok(mut q) = vq.lock::<CtrlBuf>() else {
            return;
        };
        while let Some(used) = q.get_buf() {
            // One command is in flight at a time, so there is at most one buffer to hand over.
            self.done.lock().buf = Some(used);
            self.wait.notify_all();
        }
    }
}

/// The control queue of one device.
pub(crate) struct Ctrl<'a> {
    /// The device messages are about (the virtio device, or the RoCE device of a virtio-net
    /// device).
    dev: &'a device::Device,
    vqs: Pin<KBox<Virtqueues<'a, Handler<'a>>>>,
    /// Serialises commands; holds the command buffer while the driver owns it.
    buf: Pin<KBox<Mutex<Option<KBox<CtrlBuf>>>>>,
}

impl<'a> Ctrl<'a> {
    /// Takes over the device's queues (the control queue is queue 0).
    pub(crate) fn new(
        dev: &'a device::Device,
        vqs: Pin<KBox<Virtqueues<'a, Handler<'a>>>>,
    ) -> Result<Self> {
        let buf = KBox::new(CtrlBuf::new_zeroed(), GFP_KERNEL)?;
        let buf = KBox::pin_init(new_mutex!(Some(buf), "virtio_rdma_ctrl_cmd"), GFP_KERNEL)?;
        Ok(Self { dev, vqs, buf })
    }

    /// The device stopped (it needs a reset): the command waiting ends, and no command is sent
    /// from now on. Any context.
    pub(crate) fn stop(&self) {
        let done = &self.vqs.handler().get_ref().ctrl;
        done.stopped.store(true, Ordering::Release);
        // Under the lock, so that a command between its check and its sleep is not missed.
        let _guard = done.done.lock();
        done.wait.notify_all();
    }

    /// The device's virtqueues.
    pub(crate) fn queues(&self) -> &Virtqueues<'a, Handler<'a>> {
        &self.vqs
    }

    /// Runs command `cmd` with request body `req`; returns the response body.
    pub(crate) fn exec<Req, Rsp>(&self, cmd: u32, req: &Req) -> Result<Rsp>
    where
        Req: IntoBytes + Immutable,
        Rsp: FromBytes,
    {
        let req = req.as_bytes();
        let rsp_len = core::mem::size_of::<Rsp>();
        let (out_len, in_len) = command_lengths(req.len(), rsp_len).ok_or(EINVAL)?;
        let vq = self.vqs.get(abi::CTRL_VQ as usize).ok_or(ENODEV)?;
        let done = &self.vqs.handler().get_ref().ctrl;

        let mut slot = self.buf.lock();
        if done.stopped() {
            return stopped_result(cmd);
        }
        let mut buf = match slot.take() {
            Some(buf) => buf,
            // A command timed out earlier: its buffer may have come back since.
            None => done.take_done().map(|(b, _)| b).ok_or(ETIMEDOUT)?,
        };

        buf.encode(cmd, req, out_len);

        let mut q = match vq.lock::<CtrlBuf>() {
            Ok(q) => q,
            Err(e) => {
                *slot = Some(buf);
                return Err(e);
            }
        };
        if let Err((e, buf)) = q.add(buf, out_len, in_len) {
            drop(q);
            *slot = Some(buf);
            dev_err!(self.dev, "cannot queue control command {}: {:?}\n", cmd, e);
            return Err(e);
        }
        let notify = q.kick_prepare();
        drop(q);
        if notify {
            vq.notify();
        }

        let Some((buf, used)) = self.wait_done(done, cmd)? else {
            // The device stopped: the buffer stays on the queue until the queues go.
            return stopped_result(cmd);
        };
        let rsp = buf.decode(used, out_len, in_len);
        *slot = Some(buf);
        drop(slot);
        if rsp.as_ref().err() == Some(&EPROTO) {
            dev_err!(
                self.dev,
                "control command {}: malformed response ({} bytes used of {})\n",
                cmd,
                used,
                in_len
            );
        }
        rsp
    }

    /// Sleeps until the device gives the command buffer back, [`CMD_TIMEOUT_MS`] at most in
    /// all (wake-ups without the buffer do not start the wait again); `None` if the device
    /// stopped.
    fn wait_done(&self, ctrl: &CtrlDone, cmd: u32) -> Result<Option<(KBox<CtrlBuf>, u32)>> {
        let start = Instant::<Monotonic>::now();
        let mut left = msecs_to_jiffies(CMD_TIMEOUT_MS);
        let mut done = ctrl.done.lock();
        loop {
            if let Some(d) = done.buf.take() {
                return Ok(Some(d));
            }
            if ctrl.stopped() {
                return Ok(None);
            }
            match ctrl.wait.wait_interruptible_timeout(&mut done, left) {
                // The rest of the wait: a device that keeps waking the queue without giving
                // this buffer back must not hold the caller longer.
                CondVarTimeoutResult::Woken { jiffies } if jiffies > 0 => left = jiffies,
                CondVarTimeoutResult::Woken { .. } | CondVarTimeoutResult::Timeout => {
                    if let Some(d) = done.buf.take() {
                        return Ok(Some(d));
                    }
                    // The buffer stays with the device; it is taken back by a later command
                    // (if the device answers after all) or when the queues are torn down.
                    dev_err!(self.dev, "control command {} timed out\n", cmd);
                    return Err(ETIMEDOUT);
                }
                // A command cannot be abandoned because its caller got a signal (a process
                // being killed tears its objects down with one pending): the device may still
                // act on it, on memory the caller would free. Wait it out without sleeping
                // interruptibly.
                CondVarTimeoutResult::Signal { .. } => break,
            }
        }
        drop(done);
        let limit = Delta::from_millis(i64::from(CMD_TIMEOUT_MS));
        while start.elapsed() < limit {
            fsleep(Delta::from_millis(1));
            if let Some(d) = ctrl.take_done() {
                return Ok(Some(d));
            }
            if ctrl.stopped() {
                return Ok(None);
            }
        }
        dev_err!(self.dev, "control command {} timed out\n", cmd);
        Err(ETIMEDOUT)
    }
}

#[kunit_tests(virtio_rdma_ctrl)]
mod tests {
    use super::*;

    #[test]
    fn only_timeouts_and_garbled_answers_may_have_been_done() {
        assert!(may_be_done(ETIMEDOUT));
        assert!(may_be_done(EPROTO));
        for refused in [EINVAL, ENOMEM, EOPNOTSUPP, EFAULT, EBUSY, ENOENT, EIO] {
            assert!(!may_be_done(refused));
        }
    }

    #[test]
    fn status_maps_to_errno() {
        assert!(status_to_result(status::OK).is_ok());
        assert_eq!(status_to_result(status::UNSUPPORTED), Err(EOPNOTSUPP));
        assert_eq!(status_to_result(status::INVALID), Err(EINVAL));
        assert_eq!(status_to_result(status::NO_RESOURCE), Err(ENOMEM));
        assert_eq!(status_to_result(status::NOT_FOUND), Err(ENOENT));
        assert_eq!(status_to_result(status::BUSY), Err(EBUSY));
        assert_eq!(status_to_result(status::FAULT), Err(EFAULT));
        assert_eq!(status_to_result(status::BAD_STATE), Err(EINVAL));
        assert_eq!(status_to_result(8), Err(EIO));
        assert_eq!(status_to_result(0xff), Err(EIO));
    }

    #[test]
    fn a_stopped_device_releases_and_refuses() {
        for cmd in [
            abi::cmd::DESTROY_PD,
            abi::cmd::DESTROY_CQ,
            abi::cmd::DEREG_MR,
            abi::cmd::DESTROY_QP,
            abi::cmd::DEL_GID,
        ] {
            assert_eq!(stopped_result::<()>(cmd), Ok(()));
        }
        for cmd in [
            abi::cmd::QUERY_PORT,
            abi::cmd::CREATE_PD,
            abi::cmd::CREATE_CQ,
            abi::cmd::CREATE_MR,
            abi::cmd::REG_USER_MR,
            abi::cmd::CREATE_QP,
            abi::cmd::MODIFY_QP,
            abi::cmd::QUERY_QP,
            abi::cmd::ADD_GID,
        ] {
            assert_eq!(stopped_result::<u64>(cmd), Err(EIO));
        }
    }

    #[test]
    fn command_lengths_fit_the_buffer() {
        assert_eq!(command_lengths(8, 40), Some((16, 48)));
        assert_eq!(command_lengths(0, 8), Some((8, 16)));
        assert_eq!(command_lengths(8, 0), Some((16, 8)));
        assert_eq!(command_lengths(CTRL_BUF_SIZE, 0), None);
        assert_eq!(command_lengths(usize::MAX, 0), None);
        assert_eq!(
            command_lengths(0, CTRL_BUF_SIZE - 16),
            Some((8, CTRL_BUF_SIZE - 8))
        );
        assert_eq!(command_lengths(1, CTRL_BUF_SIZE - 16), None);
    }

    #[test]
    fn responses_are_validated() {
        let mut resp = [0u8; 48];
        // A full answer with status OK.
        assert!(check_response(&resp, 48, 48, 40).is_ok());
        // Too short for its body, shorter than the header, longer than the room.
        assert_eq!(check_response(&resp, 47, 48, 40), Err(EPROTO));
        assert_eq!(check_response(&resp, 7, 48, 40), Err(EPROTO));
        assert_eq!(check_response(&resp, 0, 48, 40), Err(EPROTO));
        assert_eq!(check_response(&resp, 49, 48, 40), Err(EPROTO));
        assert_eq!(check_response(&resp, u32::MAX, 48, 40), Err(EPROTO));
        // A failed command writes only the header: its status is the result.
        resp[0] = status::NOT_FOUND;
        assert_eq!(check_response(&resp, 8, 48, 40), Err(ENOENT));
        resp[0] = status::BUSY;
        assert_eq!(check_response(&resp, 48, 48, 40), Err(EBUSY));
        resp[0] = 0x42;
        assert_eq!(check_response(&resp, 8, 48, 40), Err(EIO));
    }
}
