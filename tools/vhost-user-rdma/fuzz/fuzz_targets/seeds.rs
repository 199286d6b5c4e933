// SPDX-License-Identifier: GPL-2.0
//! Seed corpora without committed binaries: when `VRDMA_FUZZ_SEEDS` names a
//! directory, a target writes its seeds there (as `seed-<target>-<n>`)
//! before libFuzzer reads its corpus. `run.sh` points it at the corpus.

use std::path::Path;

pub fn write(target: &str, seeds: Vec<Vec<u8>>) {
    let Some(dir) = std::env::var_os("VRDMA_FUZZ_SEEDS") else {
        return;
    };
    let dir = Path::new(&dir);
    std::fs::create_dir_all(dir).expect("create the seed directory");
    for (n, seed) in seeds.iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{target}-{n}")), seed).expect("write a seed");
    }
}
