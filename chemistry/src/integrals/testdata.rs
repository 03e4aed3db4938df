//! The reference cases of chemistry/tests/data/integrals (written by make_reference.py there,
//! with PySCF): the basis part of an ACES4 setup plus reference integrals, and the helpers that
//! turn them into a fake runtime context and block arguments.

use std::collections::HashMap;

use sial_superinstructions::special::Arg;
use sial_superinstructions::special::fake::Fake;

/// One line of a case file: tag, dimensions, values (as text; parsed on use).
struct Entry {
    tag: String,
    dims: Vec<usize>,
    values: Vec<String>,
}

/// A parsed case file.
pub struct Case {
    entries: HashMap<String, Entry>,
}

impl Case {
    /// Reads chemistry/tests/data/integrals/`name`.txt.
    pub fn load(name: &str) -> Case {
        let path = format!(
            "{}/tests/data/integrals/{name}.txt",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).expect("test data file");
        let mut entries = HashMap::new();
        for line in text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
        {
            let (head, values) = line.split_once('|').expect("a '|' on every line");
            let mut words = head.split_whitespace();
            let tag = words.next().expect("tag").to_string();
            let key = words.next().expect("name").to_string();
            let dims = words.map(|w| w.parse().expect("dimension")).collect();
            let values = values.split_whitespace().map(str::to_string).collect();
            entries.insert(key, Entry { tag, dims, values });
        }
        Case { entries }
    }

    fn entry(&self, name: &str) -> &Entry {
        self.entries.get(name).expect("entry in the case file")
    }

    /// Numbers of entry `name`.
    pub fn reals(&self, name: &str) -> Vec<f64> {
        self.entry(name)
            .values
            .iter()
            .map(|v| v.parse().expect("number"))
            .collect()
    }

    /// The single number of entry `name`.
    pub fn value(&self, name: &str) -> f64 {
        self.reals(name)[0]
    }

    /// The AO segment extents the case's tests use.
    pub fn segments(&self) -> Vec<usize> {
        self.reals("aoindex").iter().map(|&v| v as usize).collect()
    }

    /// Reference ERIs: 0-based AO indices and (ij|kl).
    pub fn eri_samples(&self) -> Vec<([usize; 4], f64)> {
        self.reals("eri")
            .chunks(5)
            .map(|c| ([c[0], c[1], c[2], c[3]].map(|v| v as usize), c[4]))
            .collect()
    }

    /// A fake runtime context serving the case's setup, without any array placement.
    pub fn context(&self) -> Fake {
        let mut ctx = Fake::new();
        for (name, e) in &self.entries {
            let ints = || e.values.iter().map(|v| v.parse::<i64>().expect("int"));
            let reals = || e.values.iter().map(|v| v.parse::<f64>().expect("real"));
            match e.tag.as_str() {
                "int" => {
                    let v = ints().next().expect("value") as i32;
                    ctx.ints.insert(name.clone(), v);
                }
                "real" => {
                    let v = reals().next().expect("value");
                    ctx.scalar_constants.insert(name.clone(), v);
                }
                "ints" => {
                    ctx.int_arrays
                        .insert(name.clone(), (e.dims.clone(), ints().collect()));
                }
                "reals" => {
                    ctx.arrays
                        .insert(name.clone(), (e.dims.clone(), reals().collect()));
                }
                _ => {}
            }
        }
        ctx.segments.insert("aoindex".into(), self.segments());
        ctx
    }
}

/// Tells the fake where the segments of every dimension of `array` (all AO indices with the
/// given segment extents) start, as the runtime's segment tables would.
/// The first AO of each segment (0-based).
pub fn segment_starts(segments: &[usize]) -> Vec<usize> {
    segments
        .iter()
        .scan(0, |acc, e| {
            let s = *acc;
            *acc += e;
            Some(s)
        })
        .collect()
}

pub fn place(ctx: &mut Fake, array: &str, rank: usize, extents: &[usize]) {
    for dim in 0..rank {
        let mut offset = 0;
        for (k, e) in extents.iter().enumerate() {
            ctx.offsets
                .insert((array.to_string(), dim, k as i32 + 1), offset);
            offset += e;
        }
        ctx.lower.insert((array.to_string(), dim), 1);
    }
}

/// A zero-filled block of `array` at `segments`, with the extents of those AO segments.
pub fn ao_block(array: &str, segments: &[i32], extents: &[usize]) -> Arg {
    let shape: Vec<usize> = segments.iter().map(|&s| extents[s as usize - 1]).collect();
    let size = shape.iter().product();
    Arg::block(array, segments.to_vec(), shape, vec![0.0; size])
}

/// The largest |a − b| over two equally long slices.
pub fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}
