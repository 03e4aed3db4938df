//! Where a block instruction runs: the CPU or the device (DESIGN §3 "Placement").
//!
//! The programmer marks no GPU regions. For each instruction the model estimates the time on
//! each side = calibrated compute time (a rate per operation kind plus a fixed launch
//! overhead) + the transfers its operands would need given where their newest copies are now
//! (bandwidth + latency per transfer) + the write-back of results that must go to the host
//! (a put to a server). The cheaper side wins.
//!
//! Lookahead: the caller may pass the next few instructions. The model then prices the whole
//! chain run on one side, following where each block's newest copy goes as the chain runs (a
//! block written on the device lives there; reading it on the host later costs a download), and
//! places the current instruction on the side whose chain is cheaper. So a chain on the same
//! blocks stays together, and data already on the device pulls work to the device.

use super::copies::{Intent, Location};
use std::collections::HashMap;
use std::hash::Hash;

/// The user's choice (`--device cpu|gpu|auto`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DeviceMode {
    /// Never use the device.
    Cpu,
    /// Every instruction the device can run runs there.
    Gpu,
    /// The cost model decides.
    #[default]
    Auto,
}

/// Where an instruction runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Host,
    Device,
}

/// The work of one instruction, for the cost model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OpKind {
    /// A contraction (GEMM plus permutes): floating-point operations
    /// (`ContractionPlan::flops`) and bytes of its operands and result.
    Contraction { flops: f64, bytes: f64 },
    /// Element-wise work (fill, scale, axpy, add, copy): bytes read and written.
    Elementwise { bytes: f64 },
    /// A permutation (or permute-add): bytes read and written.
    Permute { bytes: f64 },
}

/// Compute rates of one side.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rates {
    /// GEMM floating-point operations per second.
    pub flops: f64,
    /// Element-wise bytes per second.
    pub elementwise_bytes: f64,
    /// Permute bytes per second.
    pub permute_bytes: f64,
    /// Fixed seconds per instruction (kernel launch and its bookkeeping).
    pub launch: f64,
}

impl Rates {
    /// Seconds to compute `op` at these rates.
    pub fn time(&self, op: &OpKind) -> f64 {
        self.launch
            + match *op {
                OpKind::Contraction { flops, bytes } => {
                    flops / self.flops + bytes / self.permute_bytes
                }
                OpKind::Elementwise { bytes } => bytes / self.elementwise_bytes,
                OpKind::Permute { bytes } => bytes / self.permute_bytes,
            }
    }
}

/// The calibrated model of one host and one device.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Calibration {
    /// One CPU core (the worker computing alone).
    pub host: Rates,
    /// The device.
    pub device: Rates,
    /// Host-to-device and device-to-host bytes per second (pinned memory).
    pub upload_bytes: f64,
    pub download_bytes: f64,
    /// Fixed seconds per transfer.
    pub transfer_latency: f64,
}

impl Calibration {
    /// An H100 (FP64 tensor-core GEMM, HBM3, PCIe 5) against one CPU core; round figures,
    /// to be replaced by measured ones.
    pub fn h100_vs_one_core() -> Self {
        Calibration {
            host: Rates {
                flops: 30e9,
                elementwise_bytes: 10e9,
                permute_bytes: 5e9,
                launch: 0.2e-6,
            },
            device: Rates {
                flops: 40e12,
                elementwise_bytes: 2.5e12,
                permute_bytes: 1.0e12,
                launch: 10e-6,
            },
            upload_bytes: 25e9,
            download_bytes: 25e9,
            transfer_latency: 10e-6,
        }
    }

    /// For [`super::HostDevice`]: a device 100× faster at GEMM but with a 1 ms launch, so
    /// only big operations go there (tests exercise both choices).
    pub fn host_device() -> Self {
        Calibration {
            host: Rates {
                flops: 1e9,
                elementwise_bytes: 1e9,
                permute_bytes: 1e9,
                launch: 1e-7,
            },
            device: Rates {
                flops: 1e11,
                elementwise_bytes: 1e10,
                permute_bytes: 1e10,
                launch: 1e-3,
            },
            upload_bytes: 1e9,
            download_bytes: 1e9,
            transfer_latency: 1e-4,
        }
    }

    fn upload(&self, bytes: usize) -> f64 {
        self.transfer_latency + bytes as f64 / self.upload_bytes
    }

    fn download(&self, bytes: usize) -> f64 {
        self.transfer_latency + bytes as f64 / self.download_bytes
    }
}

impl Default for Calibration {
    fn default() -> Self {
        Self::h100_vs_one_core()
    }
}

/// One block an instruction uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Use<K> {
    pub key: K,
    pub bytes: usize,
    pub intent: Intent,
}

/// One instruction for the model.
#[derive(Clone, Debug, PartialEq)]
pub struct Instr<K> {
    pub op: OpKind,
    pub uses: Vec<Use<K>>,
    /// Its written blocks must reach the host afterwards (a put to a server follows).
    pub result_to_host: bool,
}

/// Estimated seconds of the current instruction (with its lookahead) on each side.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    pub host: f64,
    pub device: f64,
}

/// The placement policy: a mode and a calibration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Placement {
    pub mode: DeviceMode,
    pub calibration: Calibration,
}

impl Placement {
    pub fn new(mode: DeviceMode, calibration: Calibration) -> Self {
        Placement { mode, calibration }
    }

    /// Where to run `current`, followed by `lookahead` (the next few instructions, possibly
    /// none); `locate` tells where each block's newest copy is now
    /// (e.g. `|k| copies.newest_on(k)`).
    pub fn choose<K: Hash + Eq + Copy>(
        &self,
        current: &Instr<K>,
        lookahead: &[Instr<K>],
        locate: impl Fn(K) -> Location,
    ) -> Target {
        match self.mode {
            DeviceMode::Cpu => Target::Host,
            DeviceMode::Gpu => Target::Device,
            DeviceMode::Auto => {
                let e = self.estimate(current, lookahead, locate);
                if e.device < e.host {
                    Target::Device
                } else {
                    Target::Host
                }
            }
        }
    }

    /// The cost of running `current` and then `lookahead` all on the host, and all on the
    /// device, following the blocks' copies as the chain runs.
    pub fn estimate<K: Hash + Eq + Copy>(
        &self,
        current: &Instr<K>,
        lookahead: &[Instr<K>],
        locate: impl Fn(K) -> Location,
    ) -> Estimate {
        Estimate {
            host: self.chain_cost(Target::Host, current, lookahead, &locate),
            device: self.chain_cost(Target::Device, current, lookahead, &locate),
        }
    }

    fn chain_cost<K: Hash + Eq + Copy>(
        &self,
        side: Target,
        current: &Instr<K>,
        lookahead: &[Instr<K>],
        locate: &impl Fn(K) -> Location,
    ) -> f64 {
        let cal = &self.calibration;
        let mut at: HashMap<K, Location> = HashMap::new();
        let mut total = 0.0;
        for instr in std::iter::once(current).chain(lookahead) {
            total += match side {
                Target::Host => cal.host.time(&instr.op),
                Target::Device => cal.device.time(&instr.op),
            };
            for u in &instr.uses {
                let loc = *at.entry(u.key).or_insert_with(|| locate(u.key));
                let current_here = match side {
                    Target::Host => loc != Location::Device,
                    Target::Device => loc != Location::Host,
                };
                let mut now = loc;
                if u.intent != Intent::Write && !current_here {
                    total += match side {
                        Target::Host => cal.download(u.bytes),
                        Target::Device => cal.upload(u.bytes),
                    };
                    now = Location::Both;
                }
                if u.intent != Intent::Read {
                    now = match side {
                        Target::Host => Location::Host,
                        Target::Device => {
                            if instr.result_to_host {
                                total += cal.download(u.bytes);
                                Location::Both
                            } else {
                                Location::Device
                            }
                        }
                    };
                }
                at.insert(u.key, now);
            }
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contraction(n: usize, keys: [u32; 3], result_to_host: bool) -> Instr<u32> {
        let bytes = n * n * 8;
        Instr {
            op: OpKind::Contraction {
                flops: 2.0 * (n as f64).powi(3),
                bytes: 3.0 * bytes as f64,
            },
            uses: vec![
                Use {
                    key: keys[0],
                    bytes,
                    intent: Intent::Write,
                },
                Use {
                    key: keys[1],
                    bytes,
                    intent: Intent::Read,
                },
                Use {
                    key: keys[2],
                    bytes,
                    intent: Intent::Read,
                },
            ],
            result_to_host,
        }
    }

    fn scale(n: usize, key: u32) -> Instr<u32> {
        Instr {
            op: OpKind::Elementwise {
                bytes: (2 * n * 8) as f64,
            },
            uses: vec![Use {
                key,
                bytes: n * 8,
                intent: Intent::Update,
            }],
            result_to_host: false,
        }
    }

    #[test]
    fn tiny_ops_stay_on_the_cpu() {
        for cal in [Calibration::h100_vs_one_core(), Calibration::host_device()] {
            let p = Placement::new(DeviceMode::Auto, cal);
            assert_eq!(
                p.choose(&contraction(4, [0, 1, 2], false), &[], |_| Location::Host),
                Target::Host
            );
            assert_eq!(
                p.choose(&scale(10, 0), &[], |_| Location::Host),
                Target::Host
            );
        }
    }

    #[test]
    fn big_contractions_on_resident_blocks_go_to_the_device() {
        for cal in [Calibration::h100_vs_one_core(), Calibration::host_device()] {
            let p = Placement::new(DeviceMode::Auto, cal);
            let c = contraction(1000, [0, 1, 2], false);
            assert_eq!(p.choose(&c, &[], |_| Location::Device), Target::Device);
            // Even from the host, 2 Gflop outweigh three 8 MB transfers.
            assert_eq!(p.choose(&c, &[], |_| Location::Host), Target::Device);
        }
    }

    #[test]
    fn data_on_the_device_pulls_small_work_there() {
        let p = Placement::new(DeviceMode::Auto, Calibration::h100_vs_one_core());
        // A 32 KiB scale: on host-resident data it stays on the host ...
        let s = scale(4096, 0);
        assert_eq!(p.choose(&s, &[], |_| Location::Host), Target::Host);
        // ... but on a block whose newest copy is on the device it runs there (no download).
        assert_eq!(p.choose(&s, &[], |_| Location::Device), Target::Device);
    }

    #[test]
    fn lookahead_keeps_a_chain_on_one_side() {
        let p = Placement::new(DeviceMode::Auto, Calibration::h100_vs_one_core());
        // Block 7 is on the host, 9 on the device.
        let locate = |k: u32| {
            if k == 7 {
                Location::Host
            } else {
                Location::Device
            }
        };
        // A small scale of block 7, alone: host.
        let first = scale(4096, 7);
        assert_eq!(p.choose(&first, &[], locate), Target::Host);
        // Followed by a contraction reading block 7 and the device-resident 9: the chain
        // belongs on the device, so the scale goes there too (7 is uploaded once, 9 never
        // downloaded).
        let next = [contraction(64, [8, 7, 9], false)];
        let e = p.estimate(&first, &next, locate);
        assert!(e.device < e.host, "{e:?}");
        assert_eq!(p.choose(&first, &next, locate), Target::Device);
    }

    #[test]
    fn write_back_counts_against_the_device() {
        let p = Placement::new(DeviceMode::Auto, Calibration::h100_vs_one_core());
        let stay = contraction(300, [0, 1, 2], false);
        let put = contraction(300, [0, 1, 2], true);
        let a = p.estimate(&stay, &[], |_| Location::Host);
        let b = p.estimate(&put, &[], |_| Location::Host);
        assert_eq!(a.host, b.host);
        assert!(b.device > a.device);
    }

    #[test]
    fn forced_modes() {
        let tiny = scale(1, 0);
        let big = contraction(1000, [0, 1, 2], false);
        let cpu = Placement::new(DeviceMode::Cpu, Calibration::default());
        let gpu = Placement::new(DeviceMode::Gpu, Calibration::default());
        assert_eq!(cpu.choose(&big, &[], |_| Location::Device), Target::Host);
        assert_eq!(gpu.choose(&tiny, &[], |_| Location::Host), Target::Device);
    }
}
