#!/bin/bash
# Latency 0, prefetch off against auto, alternating runs (the noise of a shared machine hits
# both alike): median and minimum wall_seconds of each, and the ratio of the medians.
# Usage (repository root, after cargo build --release):
#   benches/prefetch_overhead.sh LABEL TWOGETS(0|1) BLOCK_EXTENT L RUNS
# e.g. benches/prefetch_overhead.sh "8MiB L=9 one get" 0 1024 9 9
cfg=$1; twogets=$2; ext=$3; L=$4; runs=$5
segs=$(python3 -c "print(','.join(['$ext']*$L))")
printf '[ints]\nnseg = %s\nncompute = 4\ntwogets = %s\n[segments]\naoindex = [%s]\n' $L $twogets $segs > /tmp/alt.toml
for r in $(seq 1 $runs); do for m in off auto; do
  ./target/release/sial run benches/prefetch.sial --setup /tmp/alt.toml --workers 1 --servers 1 --prefetch $m -q --stats /tmp/alt-$m.json
  python3 -c "import json; print('$m', json.load(open('/tmp/alt-$m.json'))['wall_seconds'])"
done; done | python3 -c "
import sys, statistics
d={}
for l in sys.stdin:
    m,v=l.split(); d.setdefault(m,[]).append(float(v))
print('$cfg', ' '.join(f'{m}: median {statistics.median(v):.4f} min {min(v):.4f}' for m,v in sorted(d.items())), f'median auto/off {statistics.median(d[\"auto\"])/statistics.median(d[\"off\"]):.3f}')
"
