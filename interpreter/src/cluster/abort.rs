//! A job-wide stop: the first rank that fails records its error; every other rank sees the
//! flag at its next wait (or loop iteration) and stops, so one failure never leaves the rest
//! hanging.

use crate::error::RuntimeError;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Debug, Default)]
pub struct Abort {
    flag: AtomicBool,
    first: Mutex<Option<RuntimeError>>,
}

impl Abort {
    /// Records `error` unless an earlier failure was recorded, and raises the flag.
    pub fn fail(&self, error: RuntimeError) {
        if let Ok(mut first) = self.first.lock()
            && first.is_none()
        {
            *first = Some(error);
        }
        self.flag.store(true, Ordering::Release);
    }

    pub fn raised(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    /// The first recorded failure.
    pub fn error(&self) -> Option<RuntimeError> {
        self.first.lock().ok().and_then(|f| f.clone())
    }

    /// The error a rank returns when it stops because another rank failed.
    pub fn stopped() -> RuntimeError {
        RuntimeError::new("stopped: another rank failed")
    }
}
