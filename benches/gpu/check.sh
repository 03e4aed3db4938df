#!/bin/bash
# The GPU checks of one session on a machine with an NVIDIA GPU (docs/benchmarks.md "GPU"), run
# from the repository root there. It needs, in .dev/ (a folder .git/info/exclude ignores):
#   bin/   stripped release builds: sial, gpu_measure (the example), gpu and distributed (the
#          test binaries of tests/gpu.rs and tests/distributed.rs, built without feature mpi)
#   aces4/ the scf, cc and utility folders of ACES4's qm/ programs
#   jobs/  b631.json and bdz.json: benzene 6-31G and cc-pVDZ CCSD jobs (sial setup)
# and writes its log and the runs' --stats files to $OUT. The test binaries look for the
# repository where they were built (/work/main): that path is linked to this one.
. benches/gpu/prepare.sh
nproc; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
el "== gpu_measure"; timeout 150 $B/gpu_measure; echo "rc=$?"
el "== torch"; timeout 60 python3 benches/gpu/torch_ref.py; echo "rc=$?"
el "== tests/gpu.rs on CUDA"; SIAL_TEST_GPU_BACKEND=cuda timeout 60 $B/gpu --test-threads 2; echo "rc=$?"
I="-I .dev/aces4/scf -I .dev/aces4/cc -I .dev/aces4/utility"
job() { # name job device workers servers [timeout]
  rm -rf sial-jobs
  /usr/bin/time -f "%e s %M KiB" -o /tmp/t timeout ${6:-120} target/release/sial run .dev/jobs/$2 -q $I --workers $4 --servers $5 --device $3 --stats $OUT/stats-$1-$3.json > /tmp/o 2>&1
  echo "$1 device=$3 W=$4 S=$5 rc=$? $(tail -1 /tmp/t) $(grep -o 'ccsd_energy = [-0-9.]*' /tmp/o | tail -1)"
  grep -i "devices:\|error" /tmp/o | head -3
}
el "== benzene 6-31G CCSD"
for d in gpu auto cpu; do job b631 b631.json $d 12 2 40; done
el "== benzene cc-pVDZ CCSD"
for d in auto gpu; do job bdz bdz.json $d 12 2 70; done
el "== tests/distributed.rs devices on CUDA"; SIAL_TEST_GPU_BACKEND=cuda timeout 200 $B/distributed devices_give_the_dump_of_one_process; echo "rc=$?"
el done
