// SPDX-License-Identifier: GPL-2.0
//! The device's vring event loops: one thread per lane of the device
//! (`lane.rs`), each waiting on the kick eventfds of the ready and enabled
//! vrings it serves (see `vring.rs` for why this is not
//! vhost-user-backend's own worker pool).
//!
//! The set of watched eventfds is rebuilt whenever a vring changes (kick
//! set, readiness, enablement); after each rebuild every watched vring is
//! served once, so requests made before the kick was watched are not lost.
//! Each round of events, with the passes of busy SQs it runs after them,
//! is one [`Pass`]: the driver is interrupted at most once per vring per
//! round.

use std::io;
use std::os::unix::io::AsRawFd;
use std::sync::Arc;
use std::thread::{self, JoinHandle};

use log::{debug, error};
use vhost_user_backend::VringT;
use virtio_queue::QueueT;
use vmm_sys_util::epoll::{ControlOperation, Epoll, EpollEvent, EventSet};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use crate::device::RdmaDevice;
use crate::engine;
use crate::stats::Counter;
use crate::vring::{Pass, RdmaVring, VringHub};

/// Non-blocking looks for events a loop whose last round sent messages
/// (served an SQ) takes before it sleeps: sends come in bursts (a driver
/// posts again as soon as the last completions arrive), and a sleep and
/// wake-up cost more than a few looks (each one system call). A round
/// that only took receives or CQ buffers sleeps at once, leaving the core
/// to the guests and the other devices' loops.
const LINGER: u32 = 8;

/// Steps (elements or chunks) a round runs of the SQs scheduled for
/// another pass before it looks for events again: passes of one busy SQ go
/// on back to back up to this many, since each look is a system call that
/// costs about two elements' work; a kick of another queue waits at most
/// this many steps (or one pass of each scheduled SQ, if more are).
const ROUND_STEPS: usize = 4 * engine::SQ_BUDGET;

const EXIT: u64 = 1 << 32;
const CHANGED: u64 = EXIT + 1;
const WAKE: u64 = EXIT + 2;

/// A device's running event loops.
pub struct Worker {
    exit: EventFd,
    handles: Vec<JoinHandle<io::Result<()>>>,
}

impl Worker {
    /// Starts a loop for each of the device's lanes over `hub`'s vrings.
    pub fn spawn(dev: Arc<RdmaDevice>, hub: Arc<VringHub>) -> io::Result<Worker> {
        let exit = EventFd::new(EFD_NONBLOCK)?;
        let mut worker = Worker {
            exit,
            handles: Vec::new(),
        };
        for lane in 0..dev.ctrl().lanes().count() {
            let (dev, hub) = (dev.clone(), hub.clone());
            let exit = worker.exit.try_clone()?;
            let spawned = thread::Builder::new()
                .name(format!("{}-lane{lane}", dev.name()))
                .spawn(move || run(&dev, &hub, &exit, lane));
            match spawned {
                Ok(handle) => worker.handles.push(handle),
                Err(e) => {
                    worker.stop();
                    return Err(e);
                }
            }
        }
        Ok(worker)
    }

    /// Stops the loops and waits for them.
    pub fn stop(self) {
        // Never read: every loop sees it.
        if let Err(e) = self.exit.write(1) {
            error!("cannot stop the vring event loops: {e}");
            return;
        }
        for handle in self.handles {
            match handle.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => error!("vring event loop failed: {e}"),
                Err(_) => error!("vring event loop panicked"),
            }
        }
    }
}

fn watch(epoll: &Epoll, fd: i32, data: u64) -> io::Result<()> {
    epoll.ctl(
        ControlOperation::Add,
        fd,
        EpollEvent::new(EventSet::IN, data),
    )
}

/// The loop of lane `lane`: the kicks of its vrings
/// ([`RdmaDevice::vring_lane`]), its rings, its scheduled SQs and its QPs'
/// RNR timers.
fn run(dev: &RdmaDevice, hub: &VringHub, exit: &EventFd, lane: usize) -> io::Result<()> {
    let vrings = hub.vrings();
    let mut events = vec![EpollEvent::default(); 64];
    let own = dev.ctrl().lanes().get(lane);
    loop {
        let epoll = Epoll::new()?;
        watch(&epoll, exit.as_raw_fd(), EXIT)?;
        watch(&epoll, hub.changed(lane).as_raw_fd(), CHANGED)?;
        watch(&epoll, own.wake().as_raw_fd(), WAKE)?;
        // Duplicates of the kick eventfds, kept open while watched.
        let mut kicks = Vec::new();
        for (index, vring) in vrings.iter().enumerate() {
            if dev.vring_lane(index) != lane {
                continue;
            }
            let kick = {
                let state = vring.get_ref();
                if !(state.get_queue().ready() && state.is_enabled()) {
                    continue;
                }
                match state.get_kick() {
                    Some(kick) => kick.try_clone()?,
                    None => continue,
                }
            };
            watch(&epoll, kick.as_raw_fd(), index as u64)?;
            kicks.push((index, kick));
        }
        debug!(
            "{}: lane {lane}: watching {} vrings",
            dev.name(),
            kicks.len()
        );
        {
            let _pass = Pass::begin();
            for (index, _) in &kicks {
                serve(dev, &vrings, *index);
            }
        }

        let mut rescan = false;
        // Whether the last round sent messages (see LINGER).
        let mut worked = false;
        while !rescan {
            // RNR retries are timed; otherwise sleep until an event. Due
            // timers run first, so that a stream of kicks cannot starve them.
            let mut next = dev.next_timer(lane);
            if next.is_some_and(|d| d.is_zero()) {
                let _pass = Pass::begin();
                next = dev.tick(lane);
            }
            // Rings in guest memory are polled while they have work and a
            // while after; then they ask for doorbells and the loop sleeps.
            let polling = {
                let _pass = Pass::begin();
                dev.poll_rings(lane)
            };
            // SQs a pass left work in are served after this round's kicks,
            // without sleeping first.
            let scheduled = own.has_scheduled();
            let timeout = if polling || scheduled {
                0
            } else {
                next.map(|d| i32::try_from(d.as_millis().max(1)).unwrap_or(i32::MAX))
                    .unwrap_or(-1)
            };
            let waited = if worked && timeout != 0 {
                wait_lingering(&epoll, timeout, &mut events)
            } else {
                epoll.wait(timeout, &mut events)
            };
            worked = false;
            let n = match waited {
                Ok(0) if scheduled => 0,
                Ok(0) if polling => continue,
                Ok(0) if timeout >= 0 => {
                    let _pass = Pass::begin();
                    dev.tick(lane);
                    continue;
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            // Whatever this round's events complete is signalled once, at
            // its end.
            let _pass = Pass::begin();
            let sent = dev.ctrl().stats().get(Counter::SentPkts);
            for event in events.iter().take(n) {
                match event.data() {
                    EXIT => return Ok(()),
                    // SQs scheduled by other threads, or a doorbell for
                    // this lane's rings: served below, or polled next.
                    WAKE => {
                        let _ = own.wake().read();
                    }
                    CHANGED => {
                        // Nonblocking: a concurrent consumer may have
                        // emptied it already.
                        let _ = hub.changed(lane).read();
                        rescan = true;
                    }
                    data => {
                        let index = usize::try_from(data).unwrap_or(usize::MAX);
                        let Some(vring) = vrings.get(index) else {
                            continue;
                        };
                        match vring.read_kick() {
                            Ok(true) => serve(dev, &vrings, index),
                            Ok(false) => {}
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                            Err(e) => error!("{}: vring {index}: kick: {e}", dev.name()),
                        }
                    }
                }
            }
            // SQs scheduled for another pass, after the kicks of this
            // round: a pass each, then more while they have work, up to
            // ROUND_STEPS. All in this round's Pass: a completion may wait
            // for the round's last pass to be signalled (at most
            // ROUND_STEPS steps; signalling each pass apart cost 14 % of
            // the 64-byte WRITE rate in benches/transfer.rs).
            let mut steps = 0;
            while steps < ROUND_STEPS && own.has_scheduled() {
                match engine::run_scheduled(dev.ctrl(), lane) {
                    // Only stalled SQs (scheduled by another thread).
                    0 => break,
                    n => steps += n,
                }
            }
            worked = dev.ctrl().stats().get(Counter::SentPkts) != sent;
        }
    }
}

/// `epoll.wait(timeout)`, after [`LINGER`] looks that do not block.
fn wait_lingering(epoll: &Epoll, timeout: i32, events: &mut [EpollEvent]) -> io::Result<usize> {
    for _ in 0..LINGER {
        let n = epoll.wait(0, events)?;
        if n > 0 {
            return Ok(n);
        }
    }
    epoll.wait(timeout, events)
}

fn serve(dev: &RdmaDevice, vrings: &[RdmaVring], index: usize) {
    let Some(vring) = vrings.get(index) else {
        return;
    };
    if let Err(e) = dev.process_queue(index, vring) {
        error!("{}: vring {index}: {e}", dev.name());
    }
}
