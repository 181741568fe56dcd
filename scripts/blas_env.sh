# Sourced by scripts that time or train models: pick OpenBLAS kernels for this CPU when OpenBLAS
# would fall back to its generic ones (OpenBLAS 0.3.21 does not recognise some newer Xeons and
# then runs "Prescott" kernels, about 4x slower). A value the user set is kept. Both sides of a
# benchmark (Gossamer and the PyTorch reference) run under the same setting.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -r /proc/cpuinfo ]; then
  if grep -qw avx512f /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo; then
    export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
    export OPENBLAS_CORETYPE=Haswell
  fi
fi
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
