//! The worker's scopes and procedure calls: the open scopes (the program's, then one per loop
//! body being run), innermost last, each with the blocks it holds; and the return addresses
//! of the procedure calls in progress.

use crate::error::{Result, RuntimeError};
use crate::store::BlockKey;
use sial_bytecode::ArraySlot;

/// Deepest chain of procedure calls (recursion is legal but must end).
const MAX_CALL_DEPTH: usize = 10_000;

pub(crate) struct Scopes {
    /// Per open scope, the blocks it holds: temp blocks die at its end, fetched ones become
    /// evictable.
    held: Vec<Vec<(ArraySlot, BlockKey)>>,
    /// Emptied lists of closed scopes, for the next scopes to open: a loop body that makes a
    /// temp block then allocates nothing for its list.
    emptied: Vec<Vec<(ArraySlot, BlockKey)>>,
    calls: Vec<usize>,
}

impl Scopes {
    /// The program's scope alone.
    pub(crate) fn new() -> Scopes {
        Scopes {
            held: vec![Vec::new()],
            emptied: Vec::new(),
            calls: Vec::new(),
        }
    }

    /// A loop body starts.
    pub(crate) fn open(&mut self) {
        self.held.push(self.emptied.pop().unwrap_or_default());
    }

    /// The innermost scope ends: the blocks it held (to be given back with [`Self::emptied`]).
    pub(crate) fn close(&mut self) -> Vec<(ArraySlot, BlockKey)> {
        self.held.pop().unwrap_or_default()
    }

    /// A closed scope's list, emptied, for a scope to come.
    pub(crate) fn emptied(&mut self, mut list: Vec<(ArraySlot, BlockKey)>) {
        // A list grown by a scope of many blocks goes back to the allocator.
        if list.capacity() <= 256 {
            list.clear();
            self.emptied.push(list);
        }
    }

    /// The innermost scope holds a block (a new temp block, or a fetched copy).
    pub(crate) fn hold(&mut self, array: ArraySlot, key: BlockKey) {
        if let Some(scope) = self.held.last_mut() {
            scope.push((array, key));
        }
    }

    /// Whether the innermost scope holds the block: a temp block that dies at its end.
    pub(crate) fn innermost_holds(&self, array: ArraySlot, key: BlockKey) -> bool {
        self.held
            .last()
            .is_some_and(|scope| scope.contains(&(array, key)))
    }

    /// A procedure call that returns to `back`.
    pub(crate) fn call(&mut self, back: usize) -> Result<()> {
        if self.calls.len() >= MAX_CALL_DEPTH {
            return Err(RuntimeError::program(format!(
                "procedure calls nested more than {MAX_CALL_DEPTH} deep (unbounded recursion?)"
            )));
        }
        self.calls.push(back);
        Ok(())
    }

    /// Where the innermost call returns to.
    pub(crate) fn ret(&mut self) -> Result<usize> {
        self.calls
            .pop()
            .ok_or_else(|| RuntimeError::new("internal: return without a call"))
    }
}
