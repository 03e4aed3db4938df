//! Objects saved between the programs of a job (SIAL-SPEC §7.11): scalars and static arrays are
//! consumed by their restore; distributed and served arrays can be restored again.

use crate::store::{Block, BlockKey};
use std::collections::HashMap;

#[derive(Debug, Default)]
pub struct Persisted {
    pub scalars: HashMap<String, f64>,
    pub statics: HashMap<String, Block>,
    pub distributed: HashMap<String, HashMap<BlockKey, Block>>,
}
