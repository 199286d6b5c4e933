// SPDX-License-Identifier: GPL-2.0
//! The control virtqueue: pops descriptor chains, hands their bytes to
//! [`Ctrl`], writes the responses back and signals the guest.

use std::io::{self, Read, Write};

use virtio_queue::DescriptorChain;
use vm_memory::{GuestAddressSpace, GuestMemoryMmap};

use crate::ctrl::{Ctrl, MAX_REQUEST_LEN};
use crate::vring::{Mem, RdmaVring};

/// Serves every available chain of the control queue.
pub fn process(ctrl: &Ctrl, vring: &RdmaVring, mem: &Mem) -> io::Result<()> {
    let mem = mem.memory();
    let mem: &GuestMemoryMmap = &mem;
    vring.serve_chains(mem, |chain| handle_chain(ctrl, chain, mem))
}

/// Runs one chain; returns the number of bytes written to its writable part.
pub fn handle_chain(
    ctrl: &Ctrl,
    chain: DescriptorChain<&GuestMemoryMmap>,
    mem: &GuestMemoryMmap,
) -> u32 {
    let head = chain.head_index();
    let mut writer = match chain.clone().writer(mem) {
        Ok(w) => w,
        Err(e) => {
            ctrl.guest_warn(format_args!(
                "control chain {head}: bad device-writable part ({e}); no response written"
            ));
            return 0;
        }
    };
    let request = match chain.reader(mem) {
        Ok(mut reader) => {
            let len = reader.available_bytes();
            if len > MAX_REQUEST_LEN {
                ctrl.guest_warn(format_args!(
                    "control chain {head}: request of {len} bytes exceeds {MAX_REQUEST_LEN}"
                ));
                Vec::new()
            } else {
                let mut buf = vec![0u8; len];
                match reader.read_exact(&mut buf) {
                    Ok(()) => buf,
                    Err(e) => {
                        ctrl.guest_warn(format_args!(
                            "control chain {head}: cannot read the request ({e})"
                        ));
                        Vec::new()
                    }
                }
            }
        }
        Err(e) => {
            ctrl.guest_warn(format_args!(
                "control chain {head}: bad device-readable part ({e})"
            ));
            Vec::new()
        }
    };
    // An empty request is answered INVALID (too short for a header).
    let response = ctrl.execute(&request, writer.available_bytes());
    if let Err(e) = writer.write_all(&response) {
        ctrl.guest_warn(format_args!(
            "control chain {head}: cannot write the response ({e})"
        ));
    }
    u32::try_from(writer.bytes_written()).unwrap_or(u32::MAX)
}
