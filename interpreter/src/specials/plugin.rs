//! Specials from shared libraries (`sial run --specials PATH`): the C interface of
//! `include/sial_special.h`, so that specials can be written in C, Fortran (`bind(C)`) or
//! Rust and used without rebuilding sial.
//!
//! The library's table is read once when it is loaded; each entry becomes a special of the
//! registry that passes its arguments as `sial_arg`s pointing at the runtime's copies (which
//! the worker writes back for `w`/`u` arguments), checks the number of arguments against the
//! signature, and turns a non-zero return into an error naming the library and the special.

use super::{Arg, ArgKind, Registry};
use crate::error::{Result, RuntimeError};
use std::ffi::{CStr, CString, c_char};
use std::path::Path;
use std::sync::Arc;

/// `sial_arg` of the header.
#[repr(C)]
struct CArg {
    kind: i32,
    rank: i32,
    name: *const c_char,
    segments: *const i32,
    shape: *const i64,
    data: *mut f64,
    len: i64,
}

type CSpecialFn = unsafe extern "C" fn(*mut CArg, i32, *mut c_char, i32) -> i32;

/// `sial_special` of the header.
#[repr(C)]
struct CSpecial {
    name: *const c_char,
    signature: *const c_char,
    call: Option<CSpecialFn>,
}

type Table = unsafe extern "C" fn(*mut i32) -> *const CSpecial;

/// The symbol every library exports.
const ENTRY: &[u8] = b"sial_specials_v1";

/// Loads the library at `path` and registers its specials (replacing shipped ones of the
/// same name); returns their names. The library stays loaded for the rest of the process.
pub fn load(path: &Path, registry: &mut Registry) -> Result<Vec<String>> {
    let shown = path.display().to_string();
    let fail = |what: String| RuntimeError::new(format!("--specials {shown}: {what}"));
    // SAFETY: loading runs the library's initialisers; a library given with --specials is
    // trusted code, as a special compiled into sial would be.
    let library = unsafe { libloading::Library::new(path) }
        .map_err(|e| fail(format!("cannot load the library: {e}")))?;
    let library = Arc::new(library);
    crash::install();
    // SAFETY: the symbol has the type the header declares for it.
    let table: libloading::Symbol<Table> = unsafe { library.get(ENTRY) }.map_err(|e| {
        fail(format!(
            "no function sial_specials_v1 (include/sial_special.h): {e}"
        ))
    })?;
    let mut count = 0i32;
    // SAFETY: the header's contract: a table of `count` entries that lives as long as the
    // library.
    let entries = unsafe { table(&mut count) };
    if entries.is_null() || count < 0 {
        return Err(fail("sial_specials_v1 returned no table".into()));
    }
    // SAFETY: as above.
    let entries = unsafe { std::slice::from_raw_parts(entries, count as usize) };
    let mut names = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let text = |p: *const c_char, what: &str| -> Result<String> {
            if p.is_null() {
                return Err(fail(format!("entry {i} of its table has no {what}")));
            }
            // SAFETY: NUL-terminated static strings, by the header's contract.
            Ok(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        };
        let name = text(e.name, "name")?;
        let signature = text(e.signature, "signature")?;
        if let Some(c) = signature.chars().find(|c| !"rwu".contains(*c)) {
            return Err(fail(format!(
                "special {name}: signature {signature:?} has {c:?}; use r, w or u per argument"
            )));
        }
        let call = e
            .call
            .ok_or_else(|| fail(format!("special {name} has no function")))?;
        let plugin = Plugin {
            library: Arc::clone(&library),
            path: shown.clone(),
            name: name.clone(),
            arity: signature.len(),
            call,
        };
        registry.register_special(
            &name,
            Arc::new(move |ctx, args| {
                let at = format!("{}:{}", ctx.program(), ctx.line());
                plugin.call(args, &at)
            }),
        );
        names.push(name);
    }
    Ok(names)
}

/// One special of a loaded library.
struct Plugin {
    /// Keeps the code of `call` loaded.
    #[allow(dead_code)]
    library: Arc<libloading::Library>,
    path: String,
    name: String,
    arity: usize,
    call: CSpecialFn,
}

impl Plugin {
    fn call(&self, args: &mut [Arg], at: &str) -> std::result::Result<(), String> {
        if args.len() != self.arity {
            return Err(format!(
                "special {} (library {}) takes {} arguments, this call gives {}",
                self.name,
                self.path,
                self.arity,
                args.len()
            ));
        }
        // What the C arguments point at, kept alive for the call.
        let names: Vec<CString> = args
            .iter()
            .map(|a| CString::new(a.name.replace('\0', "")).unwrap_or_default())
            .collect();
        let shapes: Vec<Vec<i64>> = args
            .iter()
            .map(|a| a.shape.iter().map(|&e| e as i64).collect())
            .collect();
        let mut c_args: Vec<CArg> = args
            .iter_mut()
            .zip(&names)
            .zip(&shapes)
            .map(|((a, name), shape)| CArg {
                kind: match a.kind {
                    ArgKind::Block => 0,
                    ArgKind::Scalar => 1,
                    ArgKind::WholeArray => 2,
                    ArgKind::Literal => 3,
                },
                rank: a.rank as i32,
                name: name.as_ptr(),
                segments: if a.segments.is_empty() {
                    std::ptr::null()
                } else {
                    a.segments.as_ptr()
                },
                shape: if shape.is_empty() {
                    std::ptr::null()
                } else {
                    shape.as_ptr()
                },
                data: a.data.as_mut_ptr(),
                len: a.data.len() as i64,
            })
            .collect();
        let mut message = vec![0 as c_char; 1024];
        let note = format!(
            "FATAL ERROR: special {} (library {}) crashed at {at}: the process was stopped by the signal below\n",
            self.name, self.path
        );
        let _armed = crash::Note::arm(note.as_bytes());
        // SAFETY: the arguments point at live data of the lengths given; the function has the
        // header's type.
        let code = unsafe {
            (self.call)(
                c_args.as_mut_ptr(),
                c_args.len() as i32,
                message.as_mut_ptr(),
                message.len() as i32,
            )
        };
        if code == 0 {
            return Ok(());
        }
        let last = message.len() - 1;
        message[last] = 0;
        // SAFETY: NUL-terminated above at the latest.
        let text = unsafe { CStr::from_ptr(message.as_ptr()) }.to_string_lossy();
        Err(format!(
            "special {} (library {}) failed with code {code}{}",
            self.name,
            self.path,
            if text.is_empty() {
                String::new()
            } else {
                format!(": {text}")
            }
        ))
    }
}

/// A crash inside a plugin (invalid memory access, an illegal instruction, …) cannot be
/// recovered from, but it can be named: while a plugin runs, this thread holds a message, and
/// the signal handler writes it to stderr before the process ends by the signal. Faults
/// outside plugins go to the handler that was there before (Rust's stack-overflow report).
mod crash {
    use std::cell::Cell;
    use std::sync::OnceLock;

    const SIGNALS: [libc::c_int; 4] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE];

    thread_local! {
        /// The message of the plugin this thread is in: pointer and length, or null.
        static NOTE: Cell<(*const u8, usize)> = const { Cell::new((std::ptr::null(), 0)) };
    }

    /// The handlers that were installed before, per signal of [`SIGNALS`].
    static PREVIOUS: OnceLock<Vec<libc::sigaction>> = OnceLock::new();

    /// This thread's message while a plugin runs; cleared when dropped.
    pub(super) struct Note;

    impl Note {
        pub(super) fn arm(message: &[u8]) -> Note {
            NOTE.with(|n| n.set((message.as_ptr(), message.len())));
            Note
        }
    }

    impl Drop for Note {
        fn drop(&mut self) {
            NOTE.with(|n| n.set((std::ptr::null(), 0)));
        }
    }

    extern "C" fn on_fault(signal: libc::c_int) {
        let (ptr, len) = NOTE.with(|n| n.get());
        let index = SIGNALS.iter().position(|&s| s == signal);
        // SAFETY: write(2) and sigaction(2) are async-signal-safe; the message outlives the
        // plugin call it was armed for. Restoring the earlier action and returning re-runs the
        // faulting instruction under it (the default ends the process by the signal).
        unsafe {
            if !ptr.is_null() {
                libc::write(2, ptr.cast(), len);
                libc::signal(signal, libc::SIG_DFL);
            } else if let (Some(i), Some(previous)) = (index, PREVIOUS.get()) {
                libc::sigaction(signal, &previous[i], std::ptr::null_mut());
            } else {
                libc::signal(signal, libc::SIG_DFL);
            }
        }
    }

    /// Installs the handler (once per process).
    pub(super) fn install() {
        PREVIOUS.get_or_init(|| {
            SIGNALS
                .iter()
                .map(|&signal| {
                    // SAFETY: plain sigaction(2) calls with initialised structures; the
                    // handler only does async-signal-safe work.
                    unsafe {
                        let mut action: libc::sigaction = std::mem::zeroed();
                        action.sa_sigaction = on_fault as extern "C" fn(libc::c_int) as usize;
                        action.sa_flags = libc::SA_ONSTACK;
                        libc::sigemptyset(&mut action.sa_mask);
                        let mut previous: libc::sigaction = std::mem::zeroed();
                        libc::sigaction(signal, &action, &mut previous);
                        previous
                    }
                })
                .collect()
        });
    }
}
