// SPDX-License-Identifier: GPL-2.0
//! The fabric: every device this process serves, and the one lock that
//! serializes their object tables and data paths.
//!
//! Why one lock: a work request on one device may consume a receive, write
//! a completion and change a QP's state on another device (which runs its
//! own thread). Taking the fabric lock before any device's state makes such
//! multi-device steps atomic and free of lock-order inversions, and makes
//! atomic operations atomic with respect to every other device operation
//! (IB_ATOMIC_HCA across the process). Control commands and data-path entry
//! points take it; everything below them receives the guard.
//!
//! The data path holds it for one element or one chunk of a large message
//! at a time and gives it up fairly ([`unlock_fair`]): a thread that
//! releases it and asks again at once does not get it back ahead of
//! another device's thread that was waiting. parking_lot's lock does that
//! hand-over; std's lets the releasing thread win again.

use std::sync::{Arc, Weak};

use parking_lot::{Mutex, MutexGuard};

use crate::ctrl::Ctrl;
use crate::device::RdmaDevice;

static DEVICES: Mutex<Vec<Weak<RdmaDevice>>> = Mutex::new(Vec::new());

/// Proof that the fabric lock is held, and the registered devices.
pub type Fabric = MutexGuard<'static, Vec<Weak<RdmaDevice>>>;

/// Takes the fabric lock.
pub fn lock() -> Fabric {
    DEVICES.lock()
}

/// Releases the fabric lock to a thread waiting for it, if any.
pub fn unlock_fair(f: Fabric) {
    MutexGuard::unlock_fair(f);
}

/// Adds `dev` to the fabric (dropped devices leave it by themselves).
pub fn register(dev: &Arc<RdmaDevice>) {
    let mut f = lock();
    f.retain(|d| d.strong_count() > 0);
    f.push(Arc::downgrade(dev));
}

/// The live devices.
pub fn devices(f: &Fabric) -> Vec<Arc<RdmaDevice>> {
    f.iter().filter_map(Weak::upgrade).collect()
}

/// The device whose GID table holds `gid`: there is at most one, as
/// ADD_GID refuses a GID another device holds.
pub fn by_gid(f: &Fabric, gid: &[u8; 16]) -> Option<Arc<RdmaDevice>> {
    devices(f).into_iter().find(|d| d.ctrl().has_gid(gid))
}

/// The device whose control engine is `ctrl`.
pub fn by_ctrl(f: &Fabric, ctrl: &Ctrl) -> Option<Arc<RdmaDevice>> {
    devices(f)
        .into_iter()
        .find(|d| std::ptr::eq(d.ctrl(), ctrl))
}
