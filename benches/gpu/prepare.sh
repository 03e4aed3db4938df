# What every GPU check script does first, sourced from the repository root on the GPU machine:
# its output also goes to $OUT/log.txt, `el` prints a line with the seconds since the start,
# CUDA's libraries are reachable under the names cudarc opens, and the carried builds in
# .dev/bin are in place: sial as target/release/sial, and /work/main (where the test binaries
# were built) linked to this repository.
set -u
OUT=${OUT:-/tmp/gpu-check}; mkdir -p "$OUT"
exec > >(tee $OUT/log.txt) 2>&1
T0=$(date +%s); el() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
el start
# cudarc opens libcublas.so / libnvrtc.so (or .so.12): link CUDA 13's libraries under those names.
L=/tmp/cudalib; mkdir -p $L; LP=$L
for lib in cublas cublasLt nvrtc nvrtc-builtins; do
  f=$(ls /usr/local/cuda/lib64/lib$lib.so.* /usr/local/cuda/targets/x86_64-linux/lib/lib$lib.so.* 2>/dev/null | sort -V | tail -1)
  [ -z "$f" ] && f=$(find /usr /opt -name "lib$lib.so.*" 2>/dev/null | sort -V | tail -1)
  echo "lib$lib -> $f"; [ -n "$f" ] && ln -sf "$f" $L/lib$lib.so && LP=$LP:$(dirname "$f")
done
export LD_LIBRARY_PATH=$LP:${LD_LIBRARY_PATH:-}
B=.dev/bin; chmod +x $B/*
mkdir -p target/release && cp $B/sial target/release/sial
if [ ! -e /work/main ]; then mkdir -p /work && ln -s "$PWD" /work/main; fi
