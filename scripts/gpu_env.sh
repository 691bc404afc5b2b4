# Sourced by the GPU-machine scripts (run from the repo root there, with .gpu-carry/ from
# scripts/gpu_carry.sh): C = the carried binaries, the carried Debian .so files and the venv's
# cuDNN 9.19 on the library path (../shared/docs/GPU.md), PY = the venv's Python (torch 2.11).
C=.gpu-carry
# Carried files compressed with xz to keep the carry under 64 MiB (any .xz under .gpu-carry/) are
# decompressed in place, once, for every script that sources this file.
find $C -name '*.xz' -exec xz -d -f {} + 2>/dev/null || true
CUDNN=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib
# NVRTC (generated FusedPointwise kernels, decision 0091): the toolkit's, else the venv's cu13 copy.
export LD_LIBRARY_PATH=$PWD/$C/lib:$CUDNN:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib
PY=/opt/torch/.venv/bin/python
[ -x "$PY" ] || PY=python3
# Progress lines with the seconds since the script started (a script may set T0 before sourcing
# this file), and `has STEP`: whether STEP is one of the words of $STEPS.
T0=${T0:-$(date +%s)}
stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
# Seconds left of the call's budget (KILN_BUDGET_S, default 570) since T0.
left() { echo $(( ${KILN_BUDGET_S:-570} - ($(date +%s) - T0) )); }
has() { case " ${STEPS:-} " in *" $1 "*) return 0;; *) return 1;; esac; }
# measured LOG CMD...: runs CMD with its stdout and stderr to LOG, then appends its wall seconds and peak
# resident set (its children's ru_maxrss) as JSON on the last line of LOG; returns CMD's status.
measured() {
  local log=$1; shift
  "$PY" - "$log" "$@" <<'PYEOF'
import json, resource, subprocess, sys, time
log, cmd = sys.argv[1], sys.argv[2:]
t = time.time()
with open(log, "w") as f:
    rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT)
wall = time.time() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1048576
with open(log, "a") as f:
    f.write("\n" + json.dumps({"rc": rc, "wall_s": round(wall, 1), "peak_rss_gib": round(rss, 2)}) + "\n")
sys.exit(rc)
PYEOF
}
