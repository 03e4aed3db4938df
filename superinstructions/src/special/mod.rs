//! The interface between the runtime and super instructions ("specials", SIAL-SPEC §8): the
//! argument model, the services the runtime offers ([`Context`]), and the [`Registry`] that maps
//! SIAL names to Rust functions. Libraries of specials (the runtime's general ones, the chemistry
//! crate) depend on this module alone, not on the runtime.

pub mod fake;

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// What an argument is (§4.16 argument forms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    /// A block `a[i,j]`, or a region `c[l1:u1,…]` of a contiguous local array.
    Block,
    /// The bare name of a scalar: a 1-element block aliasing the scalar, so `w`/`u` write it.
    Scalar,
    /// The bare name of a static or contiguous array: the whole array.
    WholeArray,
    /// A DOUBLE literal: a read-only 1-element block.
    Literal,
}

/// One argument of a special, as if by value: for `w`/`u` arguments the runtime writes `data`
/// back after the call (for `w` zero-filled before it); for `r` arguments what the special
/// writes is dropped. A block the worker holds is handed over, not copied: taken out of its
/// array for the call and put back after it, as ACES4 hands a special the block's own memory;
/// for reading, a fetched copy of a server's block is shared with the special ([`ArgData`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Arg {
    pub kind: ArgKind,
    /// Array or scalar name (`""` for a literal).
    pub name: String,
    /// Declared rank (0 for scalars and literals).
    pub rank: usize,
    /// Segment number per dimension (empty for scalars, literals and whole arrays).
    pub segments: Vec<i32>,
    /// Extent per dimension (empty for scalars and literals).
    pub shape: Vec<usize>,
    /// Column-major elements (first index fastest); one element for scalars and literals.
    pub data: ArgData,
}

/// Elements the runtime shares with a special for reading.
pub trait Elements: Send + Sync {
    fn elements(&self) -> &[f64];
}

/// The elements of an argument, as a slice (`Deref`). For a read (`r`) argument they may be
/// the runtime's own, not a copy: a block the worker holds, lent for the call, or a fetched
/// copy of a server's block, which the worker's cache also holds. The first change the special
/// makes (`DerefMut`, [`ArgData::to_mut`]) then copies them into a vector of the argument's
/// own, so that what it writes is dropped, as for a copy. Copying every such block for the
/// call cost CCSD(T) a tenth of its time (docs/benchmarks.md, "Specials' block arguments lent,
/// not copied").
#[derive(Clone, Default)]
pub struct ArgData {
    /// The argument's own elements; unused while `read` holds them and `copied` is false.
    own: Vec<f64>,
    read: Option<ReadOnly>,
    copied: bool,
}

#[derive(Clone)]
enum ReadOnly {
    Shared(Arc<dyn Elements>),
    Lent(Vec<f64>),
}

impl ReadOnly {
    fn elements(&self) -> &[f64] {
        match self {
            ReadOnly::Shared(e) => e.elements(),
            ReadOnly::Lent(v) => v,
        }
    }
}

impl ArgData {
    /// Elements shared with the runtime for reading.
    pub fn shared(elements: Arc<dyn Elements>) -> ArgData {
        ArgData {
            own: Vec::new(),
            read: Some(ReadOnly::Shared(elements)),
            copied: false,
        }
    }

    /// The runtime's own elements lent for reading; [`ArgData::take_lent`] gives them back
    /// unchanged.
    pub fn lent(elements: Vec<f64>) -> ArgData {
        ArgData {
            own: Vec::new(),
            read: Some(ReadOnly::Lent(elements)),
            copied: false,
        }
    }

    /// The lent elements, as they were lent.
    pub fn take_lent(self) -> Option<Vec<f64>> {
        match self.read {
            Some(ReadOnly::Lent(v)) => Some(v),
            _ => None,
        }
    }

    /// The argument's own vector, copied from the runtime's elements first if need be.
    pub fn to_mut(&mut self) -> &mut Vec<f64> {
        if let (Some(read), false) = (&self.read, self.copied) {
            self.own = read.elements().to_vec();
            self.copied = true;
        }
        &mut self.own
    }

    pub fn as_slice(&self) -> &[f64] {
        self
    }

    /// The elements as a vector of their own (a copy only where they are the runtime's).
    pub fn into_vec(mut self) -> Vec<f64> {
        std::mem::take(self.to_mut())
    }
}

impl From<Vec<f64>> for ArgData {
    fn from(own: Vec<f64>) -> ArgData {
        ArgData {
            own,
            read: None,
            copied: false,
        }
    }
}

impl std::ops::Deref for ArgData {
    type Target = [f64];
    fn deref(&self) -> &[f64] {
        match (&self.read, self.copied) {
            (Some(read), false) => read.elements(),
            _ => &self.own,
        }
    }
}

impl std::ops::DerefMut for ArgData {
    fn deref_mut(&mut self) -> &mut [f64] {
        self.to_mut()
    }
}

impl<'a> IntoIterator for &'a ArgData {
    type Item = &'a f64;
    type IntoIter = std::slice::Iter<'a, f64>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a> IntoIterator for &'a mut ArgData {
    type Item = &'a mut f64;
    type IntoIter = std::slice::IterMut<'a, f64>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

impl PartialEq for ArgData {
    fn eq(&self, other: &ArgData) -> bool {
        **self == **other
    }
}

impl PartialEq<Vec<f64>> for ArgData {
    fn eq(&self, other: &Vec<f64>) -> bool {
        **self == **other
    }
}

impl PartialEq<[f64]> for ArgData {
    fn eq(&self, other: &[f64]) -> bool {
        **self == *other
    }
}

impl<const N: usize> PartialEq<[f64; N]> for ArgData {
    fn eq(&self, other: &[f64; N]) -> bool {
        **self == *other
    }
}

impl std::fmt::Debug for ArgData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl Arg {
    /// A block `name[segments…]` of the given shape and data.
    pub fn block(name: &str, segments: Vec<i32>, shape: Vec<usize>, data: Vec<f64>) -> Arg {
        Arg {
            kind: ArgKind::Block,
            name: name.to_string(),
            rank: shape.len(),
            segments,
            shape,
            data: data.into(),
        }
    }

    /// The bare name of a scalar holding `value`.
    pub fn scalar(name: &str, value: f64) -> Arg {
        Arg {
            kind: ArgKind::Scalar,
            name: name.to_string(),
            rank: 0,
            segments: Vec::new(),
            shape: Vec::new(),
            data: vec![value].into(),
        }
    }

    /// A DOUBLE literal.
    pub fn literal(value: f64) -> Arg {
        Arg {
            kind: ArgKind::Literal,
            name: String::new(),
            rank: 0,
            segments: Vec::new(),
            shape: Vec::new(),
            data: vec![value].into(),
        }
    }

    /// The bare name of a static or contiguous array: the whole array.
    pub fn whole_array(name: &str, shape: Vec<usize>, data: Vec<f64>) -> Arg {
        Arg {
            kind: ArgKind::WholeArray,
            name: name.to_string(),
            rank: shape.len(),
            segments: Vec::new(),
            shape,
            data: data.into(),
        }
    }

    /// Segment numbers as ACES4 passes them (`index_values`, §8.2): the block's segments, or all
    /// 1 for whole arrays (and nothing for rank 0). Used for file names and listings.
    pub fn index_values(&self) -> Vec<i32> {
        if self.segments.len() == self.rank {
            self.segments.clone()
        } else {
            vec![1; self.rank]
        }
    }

    /// How the argument is named in messages: `a[1,2]`, `x`, or the literal's value.
    pub fn describe(&self) -> String {
        match self.kind {
            ArgKind::Block => {
                let segs: Vec<String> = self.segments.iter().map(i32::to_string).collect();
                format!("{}[{}]", self.name, segs.join(","))
            }
            ArgKind::Scalar | ArgKind::WholeArray => self.name.clone(),
            ArgKind::Literal => format!("literal {}", self.data.first().copied().unwrap_or(0.0)),
        }
    }
}

/// Services the runtime offers to specials (§8.3).
pub trait Context {
    /// This worker's rank among the workers (0 in a single-worker run).
    fn worker_rank(&self) -> usize;
    /// Current SIAL source line.
    fn line(&self) -> u32;
    /// Program name.
    fn program(&self) -> &str;
    /// SIAL output (the runtime decides which ranks print, §4.17).
    fn print(&mut self, text: &str);
    /// Output that ACES4 writes straight to stdout on every rank (`print_block`, the listings,
    /// the test helpers), bypassing the rank-0 rule of SIAL `print`. The default sends it through
    /// [`Context::print`]; a multi-worker runtime that wants ACES4's behaviour overrides it.
    fn print_all_ranks(&mut self, text: &str) {
        self.print(text);
    }
    /// Element offset of segment `segment` of dimension `dim` of array `array`, counted from
    /// segment 1 of that dimension's index kind (for an MO index: the orbital number minus 1).
    /// Chemistry specials use it to find the orbitals of a block. `None` when unknown.
    fn global_offset(&self, _array: &str, _dim: usize, _segment: i32) -> Option<usize> {
        None
    }
    /// The extents of the segments of an index kind (`aoindex`, `moindex`, `moaindex`,
    /// `mobindex`, `laindex`), segment 1 first, as the job's segment tables give them.
    fn segment_extents(&self, _kind: &str) -> Option<Vec<usize>> {
        None
    }
    /// The first segment of the declared range of dimension `dim` of `array`.
    fn declared_lower(&self, _array: &str, _dim: usize) -> Option<i32> {
        None
    }
    fn set_all_rank_print(&mut self, on: bool);
    fn set_debug_print(&mut self, on: bool);
    /// Predefined int from setup.
    fn int_constant(&self, name: &str) -> Option<i32>;
    /// Predefined scalar from setup.
    fn scalar_constant(&self, name: &str) -> Option<f64>;
    /// Current value of a SIAL scalar.
    fn scalar(&self, name: &str) -> Option<f64>;
    /// Sets a SIAL scalar; false if there is none of that name.
    fn set_scalar(&mut self, name: &str, value: f64) -> bool;
    /// Predefined double array from setup: shape and column-major data.
    fn predefined_array(&self, name: &str) -> Option<(Vec<usize>, Vec<f64>)>;
    /// Predefined int array from setup: shape and column-major data.
    fn predefined_int_array(&self, name: &str) -> Option<(Vec<usize>, Vec<i64>)>;
    /// Per-program configuration (`SialConfiguration`).
    fn config(&self, key: &str) -> Option<String>;
    /// Descriptions of the worker's blocks, one per block (`list_block_map`).
    fn block_list(&self) -> Vec<String>;
    /// Directory for block files.
    fn work_dir(&self) -> PathBuf;
    /// What specials keep on this worker between calls (a basis set built once, iteration
    /// history); it lives as long as the program.
    fn state(&mut self) -> &mut State;
}

/// Values specials keep between calls, one per type. A special takes its value out, works
/// with it and the [`Context`], and puts it back, so the two are never borrowed at once.
#[derive(Default)]
pub struct State {
    values: HashMap<TypeId, Box<dyn Any + Send>>,
}

impl State {
    /// Removes and returns the value of type `T`, if there is one.
    pub fn take<T: Any + Send>(&mut self) -> Option<T> {
        let value = self.values.remove(&TypeId::of::<T>())?;
        value.downcast::<T>().ok().map(|b| *b)
    }

    /// Stores `value`, replacing the value of its type.
    pub fn put<T: Any + Send>(&mut self, value: T) {
        self.values.insert(TypeId::of::<T>(), Box::new(value));
    }

    /// The value of type `T`, if there is one.
    pub fn get<T: Any + Send>(&self) -> Option<&T> {
        self.values.get(&TypeId::of::<T>())?.downcast_ref::<T>()
    }
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "State({} values)", self.values.len())
    }
}

/// A special: returns `Err(message)` for what ACES4 reports with a nonzero `ierr`.
pub type SpecialFn = fn(&mut dyn Context, &mut [Arg]) -> Result<(), String>;

/// A registered special: a function of a library of specials, or one loaded at run time (a
/// plugin's entry point with its library).
pub type Special = Arc<dyn Fn(&mut dyn Context, &mut [Arg]) -> Result<(), String> + Send + Sync>;

/// Name → implementation. Names are lower case, as the compiler lower-cases SIAL names (§1.3);
/// a missing name is not an error until a program executes it (§8.1).
#[derive(Clone, Default)]
pub struct Registry {
    map: HashMap<String, Special>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Registry({:?})", self.names())
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Registers every `(name, signature, function)` of a library of specials.
    pub fn register_all(&mut self, specials: &[(&str, &str, SpecialFn)]) {
        for (name, _, f) in specials {
            self.register(name, *f);
        }
    }

    /// Registers `f` under the lower-cased `name`, replacing any earlier one (so an application can
    /// override a shipped special).
    pub fn register(&mut self, name: &str, f: SpecialFn) {
        self.register_special(name, Arc::new(f));
    }

    /// Registers any callable under the lower-cased `name` (plugins, closures of embedders).
    pub fn register_special(&mut self, name: &str, f: Special) {
        self.map.insert(name.to_ascii_lowercase(), f);
    }

    /// The implementation of `name` (looked up lower-cased).
    pub fn get(&self, name: &str) -> Option<Special> {
        self.map.get(&name.to_ascii_lowercase()).cloned()
    }

    /// Every registered name, sorted (for listings and deterministic messages).
    pub fn names(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.map.keys().map(String::as_str).collect();
        v.sort_unstable();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Block(Vec<f64>);
    impl Elements for Block {
        fn elements(&self) -> &[f64] {
            &self.0
        }
    }

    #[test]
    fn runtime_elements_are_copied_at_the_first_change_only() {
        let mut lent = ArgData::lent(vec![1.0, 2.0]);
        assert_eq!(lent, [1.0, 2.0]);
        lent[0] = 5.0;
        assert_eq!(lent, [5.0, 2.0]);
        assert_eq!(lent.take_lent(), Some(vec![1.0, 2.0]));

        let block = Arc::new(Block(vec![3.0, 4.0]));
        let mut shared = ArgData::shared(block.clone());
        assert_eq!(shared.as_slice(), &[3.0, 4.0]);
        shared.to_mut().push(6.0);
        assert_eq!(shared, vec![3.0, 4.0, 6.0]);
        assert_eq!(block.0, vec![3.0, 4.0]);
        assert_eq!(shared.into_vec(), vec![3.0, 4.0, 6.0]);

        let own = ArgData::from(vec![7.0]);
        assert_eq!(own.clone().take_lent(), None);
        assert_eq!(own.into_vec(), vec![7.0]);
    }
}
