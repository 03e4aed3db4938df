//! The text of SIAL `print` statements, production format (SIAL-SPEC §7.12).
//!
//! Every function here is pure: it returns the exact text ACES4's production printer writes, and
//! the runtime decides where it goes and which ranks print (§4.17). `println` is the same text
//! followed by one more `"\n"`, added by the caller.
//!
//! Doubles are written like a C++ stream in `std::fixed` mode with precision 14 (see [`fixed`]),
//! which is what ACES4's production printer sets on its output stream.
//!
//! Choices where §7.12 is silent (documented in `docs/specials.md` as well):
//! * a block or region with more than [`MAX_PRINTED_ELEMENTS`] elements prints that many, then
//!   `....`, then the final line end; the header then reads `printing 1000000 of N elements`;
//! * a whole static array uses the same limit and always uses the multi-element layout (even with
//!   one element), with the line end placed *before* every `extent_0` elements as for blocks;
//! * a block of rank 0 (no segments) prints its name with empty brackets, `name[]`;
//! * the element count is taken from `data.len()`; `shape` only gives `extent_0`, the row length.

use std::fmt::Write as _;

/// Most elements one `print` writes of a block, region or static array (ACES4's limit); when a
/// block is larger, `....` marks the cut.
pub const MAX_PRINTED_ELEMENTS: usize = 1_000_000;

/// Decimals of every double in the production format.
const DECIMALS: usize = 14;

/// Column width of the elements of a whole static array.
const STATIC_WIDTH: usize = 14;

/// A double as a C++ stream in `std::fixed` mode with the given precision writes it.
///
/// Finite values are rounded exactly (round half to even on the exact binary value), which is
/// what glibc's `printf("%.*f")` under libstdc++ does and what Rust's formatting does too;
/// negative zero keeps its sign (`-0.00…`). Special values follow glibc: `inf`, `-inf`, and
/// `nan` or `-nan` according to the sign bit (the NaN produced by `0.0/0.0` on x86 has the sign
/// bit set and prints `-nan` in ACES4).
pub fn fixed(value: f64, decimals: usize) -> String {
    if value.is_nan() {
        if value.is_sign_negative() {
            "-nan"
        } else {
            "nan"
        }
        .to_string()
    } else if value.is_infinite() {
        if value < 0.0 { "-inf" } else { "inf" }.to_string()
    } else {
        format!("{value:.decimals$}")
    }
}

/// `print "text"`: the text and a line end.
pub fn string(text: &str) -> String {
    format!("{text}\n")
}

/// `print i` for an int or index variable: `L:  name = value` and a line end.
pub fn named_int(line: u32, name: &str, value: i32) -> String {
    format!("{line}:  {name} = {value}\n")
}

/// `print x` for a scalar variable: `L:  name = 3.45600000000000` and a line end.
pub fn named_scalar(line: u32, name: &str, value: f64) -> String {
    format!("{line}:  {name} = {}\n", fixed(value, DECIMALS))
}

/// `print e` for any other int expression: the value alone, **without** a line end (an ACES4
/// quirk the production format keeps).
pub fn int_value(value: i32) -> String {
    value.to_string()
}

/// `print e` for any other scalar expression: the value with 14 decimals and a line end.
pub fn scalar_value(value: f64) -> String {
    format!("{}\n", fixed(value, DECIMALS))
}

/// `print a[i,j]`: a block, labelled `name[v1,v2,…]` with its segment numbers.
pub fn block(line: u32, name: &str, segments: &[i32], shape: &[usize], data: &[f64]) -> String {
    let label = format!("{name}[{}]", join(segments.iter().map(i32::to_string), ","));
    block_text(line, &label, shape, data)
}

/// `print c[l1:u1,…]`: a region of a contiguous local array, printed as a block whose label shows
/// the bounds; a pair with `l = u` shows the single value (`c[1:4,3]`).
///
/// `lower` and `upper` are paired up to the shorter of the two.
pub fn region(
    line: u32,
    name: &str,
    lower: &[i32],
    upper: &[i32],
    shape: &[usize],
    data: &[f64],
) -> String {
    let bounds = lower.iter().zip(upper).map(|(l, u)| {
        if l == u {
            l.to_string()
        } else {
            format!("{l}:{u}")
        }
    });
    let label = format!("{name}[{}]", join(bounds, ","));
    block_text(line, &label, shape, data)
}

/// `print s` for the bare name of a static array: header, then every element right-aligned in
/// 14 columns and followed by a space, a line end before every `extent_0` elements, and a final
/// line end.
pub fn static_array(line: u32, name: &str, shape: &[usize], data: &[f64]) -> String {
    let mut out = format!(
        "{line}:  printing {} of {} elements of contiguous array {name} in the order stored in memory ",
        data.len().min(MAX_PRINTED_ELEMENTS),
        data.len()
    );
    push_elements(&mut out, shape, data, STATIC_WIDTH);
    out
}

/// A block or region with its label already formed.
fn block_text(line: u32, label: &str, shape: &[usize], data: &[f64]) -> String {
    if let [only] = data {
        return format!("{line}:  {label} = {}\n", fixed(*only, DECIMALS));
    }
    let mut out = format!(
        "{line}:  printing {} of {} elements of block {label} in the order stored in memory ",
        data.len().min(MAX_PRINTED_ELEMENTS),
        data.len()
    );
    push_elements(&mut out, shape, data, 0);
    out
}

/// The element part shared by blocks and static arrays: rows of `extent_0` elements, each row
/// preceded by a line end, each element followed by a space; `....` if cut; final line end.
fn push_elements(out: &mut String, shape: &[usize], data: &[f64], width: usize) {
    // A zero or missing extent would make every element its own row; guard against the modulo
    // by zero rather than trusting the caller's shape.
    let row = shape.first().copied().filter(|&e| e > 0).unwrap_or(1);
    for (i, &v) in data.iter().take(MAX_PRINTED_ELEMENTS).enumerate() {
        if i % row == 0 {
            out.push('\n');
        }
        // Writing to a String cannot fail.
        let _ = write!(out, "{:>width$} ", fixed(v, DECIMALS));
    }
    if data.len() > MAX_PRINTED_ELEMENTS {
        out.push_str("....");
    }
    out.push('\n');
}

fn join(items: impl Iterator<Item = String>, sep: &str) -> String {
    items.collect::<Vec<_>>().join(sep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_matches_cpp_streams() {
        assert_eq!(fixed(3.456, 14), "3.45600000000000");
        assert_eq!(fixed(-0.0, 14), "-0.00000000000000");
        assert_eq!(fixed(1.0 / 3.0, 14), "0.33333333333333");
        assert_eq!(fixed(2.0 / 3.0, 14), "0.66666666666667");
        // Exact ties round to even, like glibc.
        assert_eq!(fixed(0.125, 2), "0.12");
        assert_eq!(fixed(0.375, 2), "0.38");
        assert_eq!(fixed(1e20, 2), "100000000000000000000.00");
        assert_eq!(fixed(f64::NAN, 14), "nan");
        assert_eq!(fixed(-f64::NAN, 14), "-nan");
        assert_eq!(fixed(f64::INFINITY, 14), "inf");
        assert_eq!(fixed(f64::NEG_INFINITY, 14), "-inf");
    }

    #[test]
    fn strings_ints_and_scalars() {
        assert_eq!(string("hello world"), "hello world\n");
        assert_eq!(string(""), "\n");
        assert_eq!(named_int(7, "norb", 3), "7:  norb = 3\n");
        assert_eq!(named_int(12, "i", -4), "12:  i = -4\n");
        assert_eq!(named_scalar(9, "x", 3.456), "9:  x = 3.45600000000000\n");
        assert_eq!(named_scalar(9, "x", -2.0), "9:  x = -2.00000000000000\n");
        assert_eq!(named_scalar(1, "y", f64::INFINITY), "1:  y = inf\n");
        assert_eq!(int_value(42), "42");
        assert_eq!(int_value(-7), "-7");
        assert_eq!(scalar_value(16.0), "16.00000000000000\n");
        assert_eq!(scalar_value(-0.5), "-0.50000000000000\n");
    }

    #[test]
    fn one_element_block() {
        assert_eq!(
            block(14, "a", &[2, 3], &[1, 1], &[1.5]),
            "14:  a[2,3] = 1.50000000000000\n"
        );
        assert_eq!(
            block(3, "s", &[], &[], &[2.0]),
            "3:  s[] = 2.00000000000000\n"
        );
    }

    #[test]
    fn multi_element_block_rows_of_extent0() {
        let text = block(5, "b", &[1, 2], &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(
            text,
            "5:  printing 6 of 6 elements of block b[1,2] in the order stored in memory \n\
             1.00000000000000 2.00000000000000 \n\
             3.00000000000000 4.00000000000000 \n\
             5.00000000000000 6.00000000000000 \n"
        );
    }

    #[test]
    fn one_dimensional_block_is_one_row() {
        let text = block(2, "v", &[4], &[3], &[0.25, -1.0, f64::NAN]);
        assert_eq!(
            text,
            "2:  printing 3 of 3 elements of block v[4] in the order stored in memory \n\
             0.25000000000000 -1.00000000000000 nan \n"
        );
    }

    #[test]
    fn huge_block_is_cut_after_a_million() {
        let data = vec![0.0; MAX_PRINTED_ELEMENTS + 3];
        let text = block(1, "h", &[1], &[MAX_PRINTED_ELEMENTS + 3], &data);
        let head = "1:  printing 1000000 of 1000003 elements of block h[1] in the order stored in memory \n";
        assert!(text.starts_with(head));
        assert!(text.ends_with("0.00000000000000 ....\n"));
        assert_eq!(
            text.matches("0.00000000000000 ").count(),
            MAX_PRINTED_ELEMENTS
        );
        // Exactly the limit: nothing is cut, so no "....".
        let data = vec![0.0; MAX_PRINTED_ELEMENTS];
        let text = block(1, "h", &[1], &[MAX_PRINTED_ELEMENTS], &data);
        assert!(text.ends_with("0.00000000000000 \n"));
    }

    #[test]
    fn static_array_right_aligned_in_14_columns() {
        let text = static_array(8, "s", &[2, 2], &[1.0, f64::INFINITY, -f64::NAN, 4.0]);
        assert_eq!(
            text,
            "8:  printing 4 of 4 elements of contiguous array s in the order stored in memory \n\
             1.00000000000000            inf \n\
             \x20         -nan 4.00000000000000 \n"
        );
        // One element still uses the array layout.
        assert_eq!(
            static_array(3, "t", &[1], &[7.0]),
            "3:  printing 1 of 1 elements of contiguous array t in the order stored in memory \n\
             7.00000000000000 \n"
        );
    }

    #[test]
    fn region_labels_show_bounds() {
        assert_eq!(
            region(11, "c", &[1, 3], &[2, 3], &[2, 1], &[1.0, 2.0]),
            "11:  printing 2 of 2 elements of block c[1:2,3] in the order stored in memory \n\
             1.00000000000000 2.00000000000000 \n"
        );
        assert_eq!(
            region(4, "c", &[5, 6], &[5, 6], &[1, 1], &[-3.0]),
            "4:  c[5,6] = -3.00000000000000\n"
        );
    }

    #[test]
    fn zero_extent_shape_does_not_panic() {
        assert_eq!(
            block(1, "z", &[1], &[0], &[1.0, 2.0]),
            "1:  printing 2 of 2 elements of block z[1] in the order stored in memory \n\
             1.00000000000000 \n2.00000000000000 \n"
        );
        assert_eq!(
            block(1, "e", &[1], &[0], &[]),
            "1:  printing 0 of 0 elements of block e[1] in the order stored in memory \n"
        );
    }
}
