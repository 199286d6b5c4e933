// SPDX-License-Identifier: GPL-2.0

//! What the device may still use after the object that owned it went.
//!
//! When the device does not confirm that it destroyed a queue or deregistered an MR (the
//! command timed out, or the answer was malformed), it may still write into the memory behind
//! the object or read its page table. That memory is not handed back (a process's pinned
//! pages, the kernel's allocator) but kept here until the device is reset: the driver's data,
//! and these lists with it, go only after the reset at unbind or at a device reset
//! (`id42.rs`), or the RESET command (`net.rs`), so nothing is leaked for good either. When
//! the RESET command fails, the device may still use it all: it is leaked ([`Kept::leak`]).

use core::sync::atomic::{AtomicBool, Ordering};

use kernel::{
    alloc::kvec::PushError,
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
};

/// Things of type `T` the device may still use, kept until the device is reset.
#[pin_data]
pub(crate) struct Kept<T> {
    /// Objects go in process context (their destroy verbs, failed creates).
    #[pin]
    items: Mutex<KVec<T>>,
    /// The device was not stopped ([`Kept::leak`]): what comes later is leaked too.
    leaked: AtomicBool,
}

impl<T: Send> Kept<T> {
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                items <- new_mutex!(KVec::new(), "virtio_rdma_kept"),
                leaked: AtomicBool::new(false),
            }),
            GFP_KERNEL,
        )
    }

    /// Keeps `item` until the device is reset. Without memory for one more entry it is leaked
    /// instead: never freed, but never handed back while the device may use it either. May
    /// sleep.
    pub(crate) fn keep(&self, item: T) {
        let mut items = self.items.lock();
        if self.leaked.load(Ordering::Relaxed) {
            core::mem::forget(item);
            return;
        }
        // Reserving may fail; pushing within the capacity then hands the item back.
        let _ = items.reserve(1, GFP_KERNEL);
        if let Err(PushError(item)) = items.push_within_capacity(item) {
            core::mem::forget(item);
        }
    }

    /// Gives up on getting the items back: they, and those kept from now on (rings dropped
    /// after it), are leaked, never freed, because the device was not stopped (a RESET command
    /// that failed) and may still use them. May sleep.
    pub(crate) fn leak(&self) {
        let mut items = self.items.lock();
        // Under the lock: a `keep` after this sees it.
        self.leaked.store(true, Ordering::Relaxed);
        while let Some(item) = items.pop() {
            core::mem::forget(item);
        }
    }
}
