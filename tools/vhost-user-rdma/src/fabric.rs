// SPDX-License-Identifier: GPL-2.0
//! The fabric: every device this process serves, and the locks that keep
//! steps touching more than one device atomic without making unrelated
//! devices (other guests) wait for each other.
//!
//! A step of the data path touches at most two QPs: the one whose queue
//! it serves and, for an RC/UC QP, its destination QP on the device
//! holding its destination GID (the only QP there its requests are
//! admitted to), whose receive queue, memory and CQ it may use. Such a
//! step holds the fabric's list *shared* and the data-path locks of just
//! those QPs' lanes ([`for_qp`]; a device's QPs are split among lanes,
//! one thread each, `lane.rs`), taken in one global order (address), so
//! two steps deadlock never and run at once when their lanes differ.
//! Objects steps of different lanes share have locks of their own (a CQ's
//! ring or virtqueue, an SRQ's, the state tables, a device's MR gate held
//! from the check of an MR to the end of the copy); atomics are host
//! atomics. Holding the list shared keeps an MR from being deregistered
//! under a copy.
//!
//! Whatever may reach any device holds the list *exclusively* ([`lock`]):
//! control commands (they change GID tables, QP paths and MRs, which is
//! also why the pair a shared step chose stays the right one until it
//! ends), device resets, and UD/GSI steps (each work request names its own
//! destination).
//!
//! Finding the peer device means searching every device's GID table; a
//! QP keeps what it found ([`Route`]) until the next change of the fabric.
//!
//! Steps give their locks up fairly ([`unlock_fair`]): a thread that
//! releases them and asks again at once does not get them back ahead of
//! another thread that was waiting. parking_lot's locks do that hand-over;
//! std's let the releasing thread win again. A pass of several steps keeps
//! its locks from one step to the next while nobody waits for a fabric
//! lock ([`pass_on`]): taking and releasing them cost more than a small
//! step itself, and a waiter still waits for one step at most.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::{ArcMutexGuard, Mutex, RawMutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use smallvec::SmallVec;

use crate::ctrl::Ctrl;
use crate::device::RdmaDevice;
use crate::ib::{IB_QPT_GSI, IB_QPT_UD};

static DEVICES: RwLock<Vec<Weak<RdmaDevice>>> = RwLock::new(Vec::new());

/// Counts the holds of the whole fabric that may change paths (control
/// commands, resets, registrations): a route found under an older count
/// may be stale. Changes only with `DEVICES` held exclusively.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Threads asking for a fabric lock, counted until they hold it: a
/// holder with more steps to go hands its locks over while this is not
/// zero ([`pass_on`]). One count for every device (rather than one per
/// device) errs on the side of handing over.
static WAITING: AtomicUsize = AtomicUsize::new(0);

/// Counts the caller in [`WAITING`] while it lives.
struct Asking;

impl Asking {
    fn new() -> Self {
        WAITING.fetch_add(1, Ordering::Relaxed);
        Asking
    }
}

impl Drop for Asking {
    fn drop(&mut self) {
        WAITING.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A QP's route: the device holding its destination GID (`None`: no
/// device), and whether the destination QP there takes requests from this
/// QP (it is connected to it), found while [`GENERATION`] had this value.
pub type Route = (u64, Option<Weak<RdmaDevice>>, bool);

/// A device's data-path lock (see the module documentation).
pub type DataPath = Arc<Mutex<()>>;

/// Proof of which devices the holder may touch.
pub struct Fabric {
    reach: Reach,
}

enum Reach {
    /// Every device; no data-path step runs meanwhile.
    All(RwLockWriteGuard<'static, Vec<Weak<RdmaDevice>>>),
    /// These devices only (one or two), their data-path locks held.
    Some {
        devices: SmallVec<[Arc<RdmaDevice>; 2]>,
        /// The QP's destination GID and the device holding it, if any, as
        /// the hold found them (they stay so until it ends).
        dest: Option<([u8; 16], Option<Arc<RdmaDevice>>)>,
        _paths: SmallVec<[ArcMutexGuard<RawMutex, ()>; 2]>,
        _list: RwLockReadGuard<'static, Vec<Weak<RdmaDevice>>>,
    },
}

/// Takes the whole fabric, to change it (control commands, resets).
pub fn lock() -> Fabric {
    let asking = Asking::new();
    let list = DEVICES.write();
    drop(asking);
    GENERATION.fetch_add(1, Ordering::Relaxed);
    Fabric {
        reach: Reach::All(list),
    }
}

/// Takes the whole fabric for a step that changes no path (UD/GSI).
pub(crate) fn lock_datagram() -> Fabric {
    let asking = Asking::new();
    let list = DEVICES.write();
    drop(asking);
    Fabric {
        reach: Reach::All(list),
    }
}

/// Takes what a step serving QP `qpn` of `ctrl`'s device may touch: the
/// device and the one holding the QP's destination GID (RC/UC), or the
/// whole fabric (UD/GSI, or a device that is not registered).
pub fn for_qp(ctrl: &Ctrl, qpn: u32) -> Fabric {
    let asking = Asking::new();
    let list = DEVICES.read();
    let Some(own) = ctrl.device() else {
        drop(list);
        return lock_datagram();
    };
    // Stable while `list` is held: paths and GIDs change only under `lock`.
    let generation = GENERATION.load(Ordering::Relaxed);
    let path = {
        let st = ctrl.lock();
        let route = st.routes.get(qpn).cloned();
        st.qp(qpn).map(|q| {
            let a = &q.attr;
            let sgid = st
                .gids
                .get(usize::from(a.ah_attr.sgid_index))
                .map(|e| e.gid);
            (q.qp_type, a.ah_attr.dgid, a.dest_qp_num.get(), sgid, route)
        })
    };
    let mut devices: SmallVec<[Arc<RdmaDevice>; 2]> = SmallVec::new();
    let mut locks: SmallVec<[DataPath; 2]> = SmallVec::new();
    let mut dest = None;
    match path {
        Some((IB_QPT_UD | IB_QPT_GSI, ..)) => {
            drop(list);
            return lock_datagram();
        }
        Some((_, dgid, dest_qpn, sgid, route)) => {
            let (peer, admits) = match route {
                Some((g, peer, admits)) if g == generation => {
                    (peer.and_then(|p| p.upgrade()), admits)
                }
                _ => {
                    let mut live = list.iter().filter_map(Weak::upgrade);
                    let peer = live.find(|d| d.ctrl().has_gid(&dgid));
                    // Connected to this QP: its destination QPN this one's
                    // and its destination GID this one's source GID.
                    let admits = peer.as_ref().is_some_and(|p| {
                        p.ctrl().lock().qp(dest_qpn).is_some_and(|q| {
                            q.attr.dest_qp_num.get() == qpn && Some(q.attr.ah_attr.dgid) == sgid
                        })
                    });
                    let route = (generation, peer.as_ref().map(Arc::downgrade), admits);
                    ctrl.lock().routes.insert(qpn, route);
                    (peer, admits)
                }
            };
            dest = Some((dgid, peer.clone()));
            if let Some(peer) = peer {
                // The step may touch the destination QP, if that takes its
                // requests: that QP's lane. One connected elsewhere only
                // drops them (counted under its device's state lock), so a
                // QP aimed at another guest's QP never holds up that QP's
                // lane.
                if admits {
                    locks.push(peer.ctrl().data_path(dest_qpn).clone());
                }
                if !Arc::ptr_eq(&peer, &own) {
                    devices.push(peer);
                }
            }
        }
        None => {}
    }
    locks.push(ctrl.data_path(qpn).clone());
    devices.push(own);
    // One global order (address); a QP connected to another of its own
    // lane needs that lane once.
    locks.sort_by_key(|l| Arc::as_ptr(l) as usize);
    locks.dedup_by(|a, b| Arc::ptr_eq(a, b));
    let paths = locks.iter().map(|l| l.lock_arc()).collect();
    drop(asking);
    Fabric {
        reach: Reach::Some {
            devices,
            dest,
            _paths: paths,
            _list: list,
        },
    }
}

/// Releases `f` to threads waiting for any of its locks, if any.
pub fn unlock_fair(f: Fabric) {
    match f.reach {
        Reach::All(list) => RwLockWriteGuard::unlock_fair(list),
        Reach::Some {
            devices,
            _paths: paths,
            _list: list,
            ..
        } => {
            drop(devices);
            for p in paths {
                ArcMutexGuard::unlock_fair(p);
            }
            RwLockReadGuard::unlock_fair(list);
        }
    }
}

/// Between two steps of a pass serving QP `qpn` of `ctrl`: `f` as it is
/// if no thread waits for a fabric lock, else given up to the waiters
/// ([`unlock_fair`]) and taken again.
pub fn pass_on(f: Fabric, ctrl: &Ctrl, qpn: u32) -> Fabric {
    if WAITING.load(Ordering::Relaxed) == 0 {
        return f;
    }
    unlock_fair(f);
    for_qp(ctrl, qpn)
}

/// Adds `dev` to the fabric (dropped devices leave it by themselves).
pub fn register(dev: &Arc<RdmaDevice>) {
    let mut f = DEVICES.write();
    GENERATION.fetch_add(1, Ordering::Relaxed);
    f.retain(|d| d.strong_count() > 0);
    f.push(Arc::downgrade(dev));
    dev.ctrl().set_device(Arc::downgrade(dev));
}

/// The live devices `f` reaches.
pub fn devices(f: &Fabric) -> Vec<Arc<RdmaDevice>> {
    match &f.reach {
        Reach::All(list) => list.iter().filter_map(Weak::upgrade).collect(),
        Reach::Some { devices, .. } => devices.to_vec(),
    }
}

/// The device `f` reaches whose GID table holds `gid`: there is at most
/// one, as ADD_GID refuses a GID another device holds. For the destination
/// of the QP `f` was taken for, the answer [`for_qp`] found (the common
/// case: a step of that QP), without looking at GID tables again.
pub fn by_gid(f: &Fabric, gid: &[u8; 16]) -> Option<Arc<RdmaDevice>> {
    let holds = |d: &Arc<RdmaDevice>| d.ctrl().has_gid(gid);
    match &f.reach {
        Reach::All(list) => list.iter().filter_map(Weak::upgrade).find(holds),
        Reach::Some {
            dest: Some((dgid, dev)),
            ..
        } if dgid == gid => dev.clone(),
        Reach::Some { devices, .. } => devices.iter().find(|d| holds(d)).cloned(),
    }
}
