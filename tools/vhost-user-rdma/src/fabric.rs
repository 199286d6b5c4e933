// SPDX-License-Identifier: GPL-2.0
//! The fabric: every device this process serves, and the locks that keep
//! steps touching more than one device atomic without making unrelated
//! devices (other guests) wait for each other.
//!
//! A step of the data path touches at most two devices: the one whose
//! queue it serves and, for an RC/UC QP, the device holding the QP's
//! destination GID, whose responder QP, receive queue, memory and CQ it
//! may use. Such a step holds the fabric's list *shared* and the data-path
//! locks of just those devices ([`for_qp`]), taken in one global order
//! (address), so two steps deadlock never and run at once when their
//! devices differ. A device's data-path lock also makes atomics atomic
//! with respect to every other access to its memory, and keeps an MR from
//! being deregistered under a copy.
//!
//! Whatever may reach any device holds the list *exclusively* ([`lock`]):
//! control commands (they change GID tables, QP paths and MRs, which is
//! also why the pair a shared step chose stays the right one until it
//! ends), device resets, and UD/GSI steps (each work request names its own
//! destination).
//!
//! Steps give their locks up fairly ([`unlock_fair`]): a thread that
//! releases them and asks again at once does not get them back ahead of
//! another thread that was waiting. parking_lot's locks do that hand-over;
//! std's let the releasing thread win again.

use std::sync::{Arc, Weak};

use parking_lot::{ArcMutexGuard, Mutex, RawMutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use smallvec::SmallVec;

use crate::ctrl::Ctrl;
use crate::device::RdmaDevice;
use crate::ib::{IB_QPT_GSI, IB_QPT_UD};

static DEVICES: RwLock<Vec<Weak<RdmaDevice>>> = RwLock::new(Vec::new());

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
        _paths: SmallVec<[ArcMutexGuard<RawMutex, ()>; 2]>,
        _list: RwLockReadGuard<'static, Vec<Weak<RdmaDevice>>>,
    },
}

/// Takes the whole fabric.
pub fn lock() -> Fabric {
    Fabric {
        reach: Reach::All(DEVICES.write()),
    }
}

/// Takes what a step serving QP `qpn` of `ctrl`'s device may touch: the
/// device and the one holding the QP's destination GID (RC/UC), or the
/// whole fabric (UD/GSI, or a device that is not registered).
pub fn for_qp(ctrl: &Ctrl, qpn: u32) -> Fabric {
    let list = DEVICES.read();
    let live = || list.iter().filter_map(Weak::upgrade);
    let Some(own) = live().find(|d| std::ptr::eq(d.ctrl(), ctrl)) else {
        drop(list);
        return lock();
    };
    // Stable while `list` is held: paths and GIDs change only under `lock`.
    let path = ctrl
        .lock()
        .qp(qpn)
        .map(|q| (q.qp_type, q.attr.ah_attr.dgid));
    let mut devices: SmallVec<[Arc<RdmaDevice>; 2]> = SmallVec::new();
    match path {
        Some((IB_QPT_UD | IB_QPT_GSI, _)) => {
            drop(list);
            return lock();
        }
        Some((_, dgid)) => {
            if let Some(peer) = live().find(|d| d.ctrl().has_gid(&dgid)) {
                if !Arc::ptr_eq(&peer, &own) {
                    devices.push(peer);
                }
            }
        }
        None => {}
    }
    devices.push(own);
    devices.sort_by_key(|d| Arc::as_ptr(d) as usize);
    let paths = devices
        .iter()
        .map(|d| d.ctrl().data_path().lock_arc())
        .collect();
    Fabric {
        reach: Reach::Some {
            devices,
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
        } => {
            drop(devices);
            for p in paths {
                ArcMutexGuard::unlock_fair(p);
            }
            RwLockReadGuard::unlock_fair(list);
        }
    }
}

/// Adds `dev` to the fabric (dropped devices leave it by themselves).
pub fn register(dev: &Arc<RdmaDevice>) {
    let mut f = DEVICES.write();
    f.retain(|d| d.strong_count() > 0);
    f.push(Arc::downgrade(dev));
}

/// The live devices `f` reaches.
pub fn devices(f: &Fabric) -> Vec<Arc<RdmaDevice>> {
    match &f.reach {
        Reach::All(list) => list.iter().filter_map(Weak::upgrade).collect(),
        Reach::Some { devices, .. } => devices.to_vec(),
    }
}

/// The device `f` reaches whose GID table holds `gid`: there is at most
/// one, as ADD_GID refuses a GID another device holds.
pub fn by_gid(f: &Fabric, gid: &[u8; 16]) -> Option<Arc<RdmaDevice>> {
    let holds = |d: &Arc<RdmaDevice>| d.ctrl().has_gid(gid);
    match &f.reach {
        Reach::All(list) => list.iter().filter_map(Weak::upgrade).find(holds),
        Reach::Some { devices, .. } => devices.iter().find(|d| holds(d)).cloned(),
    }
}
