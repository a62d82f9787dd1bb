# Sourced by the wrappers (matmul.sh, test.sh): splits their arguments into `setup` (what goes
# to scripts/setup.sh: `--gpu` and an optional CUDA choice such as cu112 or 11.2) and `rest`.
split_gpu_args() {
  setup=() rest=()
  while (($#)); do
    if [ "$1" = --gpu ]; then
      setup=(--gpu)
      if (($# > 1)) && [[ "$2" =~ ^(mxnet-)?cu[0-9]+$|^[0-9]+\.[0-9]+$ ]]; then setup+=("$2"); shift; fi
    else
      rest+=("$1")
    fi
    shift
  done
}
