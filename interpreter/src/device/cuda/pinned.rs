//! Page-locked host memory of a CUDA context: the CUDA side of a [`PinnedBuf`] and the
//! allocator the pinned cache uses.

use super::*;

/// Page-locked host memory of a CUDA context (the CUDA side of a [`PinnedBuf`]).
pub struct CudaPinned {
    slice: PinnedHostSlice<f64>,
    /// The last copy queued on this buffer; host access and dropping wait for it.
    last_copy: Mutex<Option<Arc<CudaEvent>>>,
}

impl CudaPinned {
    pub(crate) fn len(&self) -> usize {
        self.slice.len()
    }

    fn settle(&self) -> Result<()> {
        let pending = lock(&self.last_copy)?.take();
        if let Some(e) = pending {
            e.synchronize().map_err(driver)?;
        }
        Ok(())
    }

    pub(crate) fn as_slice(&self) -> Result<&[f64]> {
        self.settle()?;
        self.slice.as_slice().map_err(driver)
    }

    /// The start of the buffer, for a copy into it, after any copy in flight on it.
    pub(super) fn as_mut_ptr(&mut self) -> Result<*mut f64> {
        self.settle()?;
        self.slice.as_mut_ptr().map_err(driver)
    }

    pub(crate) fn as_mut_slice(&mut self) -> Result<&mut [f64]> {
        self.settle()?;
        self.slice.as_mut_slice().map_err(driver)
    }

    pub(super) fn set_last_copy(&self, e: Arc<CudaEvent>) -> Result<()> {
        *lock(&self.last_copy)? = Some(e);
        Ok(())
    }

    pub(super) fn last_copy(&self) -> Result<Option<Arc<CudaEvent>>> {
        Ok(lock(&self.last_copy)?.clone())
    }
}

impl Drop for CudaPinned {
    fn drop(&mut self) {
        // The memory must outlive any copy reading or writing it; an error here has no one to
        // report to (the slice's own drop records it in the context).
        let _ = self.settle();
    }
}

/// Allocates page-locked (not write-combined) host memory in one context.
pub(super) struct CudaPinnedAlloc {
    pub(super) ctx: Arc<CudaContext>,
}

impl PinnedAlloc for CudaPinnedAlloc {
    fn alloc(&mut self, len: usize) -> Result<PinnedBuf> {
        let len = len.max(1);
        if len
            .checked_mul(F64_BYTES)
            .is_none_or(|b| b > isize::MAX as usize)
        {
            return Err(DeviceError::PinnedBudget {
                requested: usize::MAX,
                in_use: 0,
                budget: 0,
            });
        }
        // SAFETY: flags 0 (page-locked, cached, not write-combined); the memory is zeroed
        // below before any slice of it is formed.
        let mut slice =
            unsafe { self.ctx.alloc_pinned_with_flags::<f64>(len, 0) }.map_err(driver)?;
        let ptr = slice.as_mut_ptr().map_err(driver)?;
        // SAFETY: `ptr` points to `len` f64 just allocated and not yet shared.
        unsafe { std::ptr::write_bytes(ptr, 0, len) };
        Ok(PinnedBuf::new(PinnedMem::Cuda(CudaPinned {
            slice,
            last_copy: Mutex::new(None),
        })))
    }
}
