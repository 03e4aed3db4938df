# Baselines through PyTorch on the same GPU: cudaMemcpy from pinned memory, device copies and DGEMM.
import time, torch
def best(f, reps=5):
    f(); torch.cuda.synchronize(); b = 1e9
    for _ in range(reps):
        t = time.perf_counter(); f(); torch.cuda.synchronize(); b = min(b, time.perf_counter() - t)
    return b
print("== torch pinned copies (cudaMemcpyAsync)\n     MiB        up GB/s      down GB/s")
for mib in [1, 8, 64, 256]:
    n = mib << 17
    h = torch.empty(n, dtype=torch.float64).pin_memory(); g = torch.empty(n, dtype=torch.float64, device="cuda")
    up = best(lambda: g.copy_(h, non_blocking=True)); down = best(lambda: h.copy_(g, non_blocking=True))
    print(f"{mib:>8} {n*8/up/1e9:>14.2f} {n*8/down/1e9:>14.2f}")
print("== torch device copy and fp64 matmul")
for n in [1 << 16, 1 << 20, 1 << 24]:
    a = torch.rand(n, dtype=torch.float64, device="cuda"); b = torch.empty_like(a)
    t = best(lambda: b.copy_(a)); print(f"copy {n*8>>20} MiB: {2*n*8/t/1e9:.0f} GB/s")
for n in [1024, 2304, 4096]:
    a = torch.rand(n, n, dtype=torch.float64, device="cuda"); b = torch.rand_like(a)
    t = best(lambda: a @ b); print(f"dgemm {n}: {2*n**3/t/1e9:.0f} GF/s")
