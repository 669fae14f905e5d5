#!/bin/sh
# ref_setting.sh REF_JSON - the PyTorch setting and cap of a reference run, from the NAME.ref.json
# that traces/convert.py --reference writes: prints "POLICY CAP", POLICY a --policy spec
# ("pytorch", or "pytorch:" and the run's PYTORCH_CUDA_ALLOC_CONF) and CAP its cap in bytes (0
# when the run had none). For the benchmarks that replay a reference run as it ran
# (replay_speed.sh, results/*/ir_reference.sh).
set -eu
[ $# -eq 1 ] || { echo "usage: ref_setting.sh REF_JSON" >&2; exit 2; }
python3 -c "import json, sys; d = json.load(open(sys.argv[1]))
print(('pytorch:' + d['allocator_conf']) if d.get('allocator_conf') else 'pytorch', d.get('cap_bytes') or 0)" "$1"
