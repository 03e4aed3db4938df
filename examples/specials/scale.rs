//! Two specials in Rust, through the C interface (include/sial_special.h): build with
//!   rustc --edition 2021 --crate-type cdylib -O examples/specials/scale.rs -o libscale_rs.so
//! and run with  sial run --specials ./libscale_rs.so examples/specials/scale.sial
//! (Embedding sial in a Rust program instead, register Rust functions directly in the
//! `Registry`.)

use std::ffi::c_char;

#[repr(C)]
pub struct SialArg {
    kind: i32,
    rank: i32,
    name: *const c_char,
    segments: *const i32,
    shape: *const i64,
    data: *mut f64,
    len: i64,
}

type SpecialFn = unsafe extern "C" fn(*mut SialArg, i32, *mut c_char, i32) -> i32;

#[repr(C)]
pub struct SialSpecial {
    name: *const c_char,
    signature: *const c_char,
    call: SpecialFn,
}

/// The table is immutable static data.
struct Table([SialSpecial; 2]);
unsafe impl Sync for Table {}

static TABLE: Table = Table([
    SialSpecial {
        name: c"scale_by".as_ptr(),
        signature: c"ur".as_ptr(),
        call: scale_by,
    },
    SialSpecial {
        name: c"sum_squares".as_ptr(),
        signature: c"wr".as_ptr(),
        call: sum_squares,
    },
]);

/// The elements of argument `k`.
unsafe fn data<'a>(args: *mut SialArg, k: usize) -> &'a mut [f64] {
    let a = unsafe { &*args.add(k) };
    unsafe { std::slice::from_raw_parts_mut(a.data, a.len as usize) }
}

/// scale_by (u r): block *= factor.
unsafe extern "C" fn scale_by(args: *mut SialArg, _n: i32, _m: *mut c_char, _l: i32) -> i32 {
    let factor = unsafe { data(args, 1) }[0];
    for x in unsafe { data(args, 0) } {
        *x *= factor;
    }
    0
}

/// sum_squares (w r): scalar = sum of the block's squares.
unsafe extern "C" fn sum_squares(args: *mut SialArg, _n: i32, _m: *mut c_char, _l: i32) -> i32 {
    let s: f64 = unsafe { data(args, 1) }.iter().map(|x| x * x).sum();
    unsafe { data(args, 0)[0] = s };
    0
}

#[no_mangle]
pub extern "C" fn sial_specials_v1(count: *mut i32) -> *const SialSpecial {
    unsafe { *count = TABLE.0.len() as i32 };
    TABLE.0.as_ptr()
}
