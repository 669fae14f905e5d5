# lab/verify_setup.sh - sourced by the device scripts that run gpusim verify (device_verify.sh,
# device_async_verify.sh) after they set `usage`: their two arguments (GPUSIM, a gpusim built
# here with its GLib beside it through LD_LIBRARY_PATH; OUTDIR, made if missing) as G and out,
# the repository's root as root, verify's converter and PyTorch hook from this tree, and the
# machine written to OUTDIR/env.txt. One copy, so the scripts cannot drift apart in how they
# find the tree or what they record of the machine.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
G=${1:?$usage}
out=${2:?$usage}
mkdir -p "$out"
export GPUSIM_CONVERT="$root/traces/convert.py" GPUSIM_VERIFY_HOOK="$root/torch/verify"
export PYTHONUNBUFFERED=1
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} >"$out/env.txt" 2>&1
