#!/bin/bash
# A change to the GPU kernels measured against the previous version in one lease
# (docs/benchmarks.md, "GPU permutations"), run from the repository root on the GPU machine.
# It needs, in .dev/ (a folder .git/info/exclude ignores), built here and stripped:
#   bin/   sial and gpu_measure (the example) of this version and of the previous one
#          (sial_old, gpu_measure_old; gpu_measure_* of other versions are run too), and
#          gpu, the test binary of tests/gpu.rs
#   aces4/ the scf, cc and utility folders of ACES4's qm/ programs
#   jobs/  b631.json: benzene 6-31G CCSD (sial setup)
# and writes its log to $OUT. The test binary looks for the repository where it was built
# (/work/main): that path is linked to this one.
. benches/gpu/prepare.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
for m in $(ls $B/gpu_measure $B/gpu_measure_* 2>/dev/null); do
  el "== $m"; timeout 120 $m; echo "rc=$?"
done
el "== tests/gpu.rs on CUDA"; SIAL_TEST_GPU_BACKEND=cuda timeout 90 $B/gpu --test-threads 2; echo "rc=$?"
I="-I .dev/aces4/scf -I .dev/aces4/cc -I .dev/aces4/utility"
# Alternating, so that a drift of the machine shows.
for run in new:gpu old:gpu new:gpu old:gpu new:gpu old:gpu new:auto old:auto new:auto old:auto; do
  v=${run%:*}; d=${run#*:}; bin=$B/sial; [ $v = old ] && bin=$B/sial_old
  rm -rf sial-jobs
  /usr/bin/time -f "%e s %M KiB" -o /tmp/t timeout 60 $bin run .dev/jobs/b631.json -q $I --workers 12 --servers 2 --device $d > /tmp/o 2>&1
  echo "b631 $v device=$d rc=$? $(tail -1 /tmp/t) $(grep -o 'ccsd_energy = [-0-9.]*' /tmp/o | tail -1)"
  grep -i "error" /tmp/o | head -3
done
el done
