//! Objects a worker saves between the programs of a job (SIAL-SPEC §7.11): scalars and static
//! arrays, consumed by their restore. Distributed and served arrays are saved by the servers
//! (`server::Saved`) and can be restored again.

use crate::store::Block;
use std::collections::HashMap;

#[derive(Debug, Default, Clone)]
pub struct Persisted {
    pub scalars: HashMap<String, f64>,
    pub statics: HashMap<String, Block>,
}
