#!/bin/sh
# Runs on the GPU machine over a packed .gpu/ folder (docs/GPU.md): the GPU
# test suite, the same suite under compute-sanitizer's memcheck, racecheck,
# initcheck and synccheck, the other suites, then `bench --sweep $DG_SWEEP` (with DG_BEFORE=path/to/bench: the
# same sweep by that older binary first, then `bench compare` of the two,
# back to back on one machine; with DG_TORCH=1 and the resnet sweep in it,
# bench/peers/torch_resnet.py appends PyTorch's rows of the same step in the
# same precisions to resnet.csv right after, GPU and (DG_TORCH_CPU=1) CPU; DG_PROFILE: bench profile of those models, see below). DG_TESTS=0 skips the test suites (a second call of a run). Everything lands in one tarball,
# $OUT/gpu-results.tgz (the device returns few files); a short summary is
# printed last, and kept in $OUT/summary.txt a line a step as it goes, so
# a call cut by the device's limit still returns what finished. A missing
# or broken GPU fails the GPU tests here (DG_REQUIRE_GPU=1) instead of
# skipping them: this machine exists to run them.
set -u
export DG_REQUIRE_GPU=1
work=$(mktemp -d)
out="$work/results"
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bin=.gpu/bin
# NCCL (several GPUs) is loaded at run time: the system's, else PyTorch's
# copy (the toolkit's, 200+ MB, is too large to carry)
if ! ldconfig -p 2>/dev/null | grep -q 'libnccl.so.2 '; then
    nccl_dir=$(python3 -c 'import glob, site; c = [d for p in site.getsitepackages() for d in glob.glob(p + "/nvidia/nccl/lib")]; print(c[0] if c else "")' 2>/dev/null)
    [ -n "$nccl_dir" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl_dir"
fi
# cuDNN (DG_CONV_VENDOR's convolutions) likewise: the system's libcudnn.so.9,
# else PyTorch's copy
if ! ldconfig -p 2>/dev/null | grep -q 'libcudnn.so.9 '; then
    cudnn_dir=$(python3 -c 'import glob, site; c = [d for p in site.getsitepackages() for d in glob.glob(p + "/nvidia/cudnn/lib")]; print(c[0] if c else "")' 2>/dev/null)
    [ -n "$cudnn_dir" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$cudnn_dir"
fi
export NCCL_NVLS_ENABLE=0 # never NVLink multicast on the shared machines
# the Fashion-MNIST files carried in .gpu/data, for the suites too
[ -d .gpu/data ] && export DG_FASHION_DIR="$PWD/.gpu/data"
# the OpenMP OpenBLAS travels xz-compressed (the tree that travels is capped)
[ -f .gpu/lib/libopenblas.so.0.xz ] && xz -dkf .gpu/lib/libopenblas.so.0.xz
# Debian's OpenBLAS 0.3.21 does not know every recent Xeon and falls back to
# SSE3 kernels ("Prescott"); the test suites get the AVX-512 kernels by name
# where the CPU has them, the bench chooses its core itself
# (bench/machine/blas_core.c) unless the caller set one
user_coretype=${OPENBLAS_CORETYPE:-}
if grep -q avx512f /proc/cpuinfo && [ -z "$user_coretype" ]; then export OPENBLAS_CORETYPE=SkylakeX; fi
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv > "$out/gpu-smi.txt" 2>&1
# what dg_gpu_probe finds (present, absent or broken, and why), first
# The summary grows a line a step, kept in $OUT/summary.txt as it grows:
# a call cut by the device's time limit still brings back every finished
# step's line (the tarball is written only at the end)
summary_file="${OUT:-$work}/summary.txt"
: > "$summary_file"
say() { printf "%b\n" "$1" >> "$summary_file"; }
say "gpu_probe: $($bin/gpu_probe 2>&1)"

# a suite's synthesis and its skip counts by reason (tests/skip_report.c)
results() { grep -E 'Synthesis|\] Skipped: |DG_REQUIRE_GPU' "$1" | tr '\n' ' '; }
if [ "${DG_TESTS:-1}" = 1 ]; then
    $bin/test_gpu --jobs 4 --verbose=0 > "$out/test_gpu.log" 2>&1
    say "test_gpu: exit $? :: $(results "$out/test_gpu.log")"
    # DG_SUITES: the suites after test_gpu (default: all of them)
    for t in ${DG_SUITES:-test_gpu_tf32 test_gpu_gemm_lowp test_gpu_transfer test_conv_implicit test_cudnn test_gpu_device test_bench_faults test_optim test_range test_timing \
             test_ref_grad test_misuse test_ops test_conv test_models test_models_memory test_plan test_seams \
             test_train test_mixed test_mixed_conv test_dtype test_dtype_conv test_gemm test_shapes test_profile \
             test_attention test_sweep_attention}; do
        $bin/$t --jobs 4 > "$out/$t.log" 2>&1
        say "$t: exit $? :: $(results "$out/$t.log")"
    done
fi

if [ "${DG_SANITIZER:-1}" = 1 ]; then
    # API errors off: one test provokes cudaErrorMemoryAllocation on purpose;
    # every memory access is still checked. test_bench_faults and
    # test_gpu_device stay out: they fault a kernel on purpose.
    # DG_SANITIZER_SUITES: the suites checked (default test_gpu);
    # DG_SANITIZER_FILTER: a Criterion --filter pattern for them
    for suite in ${DG_SANITIZER_SUITES:-test_gpu}; do
        for tool in ${DG_SANITIZER_TOOLS:-memcheck racecheck initcheck synccheck}; do
            log="$out/$suite-$tool.log"
            timeout "${DG_SANITIZER_LIMIT:-240}" compute-sanitizer --tool $tool --report-api-errors no \
                --target-processes all --error-exitcode 3 $bin/$suite --jobs 1 \
                ${DG_SANITIZER_FILTER:+--filter "$DG_SANITIZER_FILTER"} > "$log" 2>&1
            say "$suite $tool: exit $? :: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | sort | uniq -c | tr '\n' ' ') :: $(grep Synthesis "$log")"
        done
    done
fi

if [ -z "$user_coretype" ]; then unset OPENBLAS_CORETYPE; fi
# DG_DTYPE: the precisions of the run (bench --dtype: fp32,tf32,bf16,fp16 or
# all; default fp32,tf32: the rows a run had before the precision axis,
# whose IMPL-tf32 rows an older bench of DG_BEFORE still writes and bench
# compare reads as IMPL at tf32), given to the bench and to the peers that take them
# (torch_ops, torch_attention, numpy_mlp, torch_mlp); the older binary of
# DG_BEFORE gets it only when set, since a binary from before the precision
# axis has no --dtype
dtype=${DG_DTYPE:-fp32,tf32}
if [ -n "${DG_SWEEP:-}" ] && [ -n "${DG_BEFORE:-}" ]; then
    # the same options as the run after it: a comparison of like with like
    timeout -s INT "${DG_BENCH_LIMIT:-400}" "$DG_BEFORE" --sweep "$DG_SWEEP" --cpu-cap "${DG_CPU_CAP:-1}" --data .gpu/data \
        ${DG_DTYPE:+--dtype "$DG_DTYPE"} ${DG_BENCH_ARGS:-} --out "$out/bench-before" > "$out/bench-before.log" 2>&1
    say "before: bench --sweep $DG_SWEEP: exit $? :: $(grep -c ',ok,' "$out"/bench-before/*.csv | tr '\n' ' ')"
fi
if [ -n "${DG_SWEEP:-}" ]; then
    # the resnet sweep's CPU rows of the own and vendor implementation sets
    # run only when --impl names them (the 2-core VM's default sweep leaves
    # them out); here every implementation, unless DG_RESNET_SETS=0
    sets=""
    case "$DG_SWEEP" in *resnet*|all) [ "${DG_RESNET_SETS:-1}" = 1 ] && sets=1 ;; esac
    # SIGINT at the time limit: bench keeps every finished row and says so
    # DG_BENCH_ARGS: more options (--cold, --samples ...)
    timeout -s INT "${DG_BENCH_LIMIT:-400}" $bin/bench --sweep "$DG_SWEEP" --cpu-cap "${DG_CPU_CAP:-1}" --data .gpu/data \
        --dtype "$dtype" ${sets:+--impl} ${sets:+"*"} ${DG_BENCH_ARGS:-} --out "$out/bench" > "$out/bench.log" 2>&1
    say "bench --sweep $DG_SWEEP: exit $? :: ok rows $(grep -c ',ok,' "$out"/bench/*.csv | tr '\n' ' ') noisy rows $(grep -c ',noisy,' "$out"/bench/*.csv | tr '\n' ' ')"
    say "$(grep 'bench:' "$out/bench.log" | tail -8)"
    # the resnet peer in every precision of the run: eager fp32, TF32,
    # bf16 and fp16 autocast, NCHW and channels-last (DG_TORCH_RESNET_LIMIT:
    # its time, 300 s by default: each precision adds two implementations);
    # DG_TORCH_CPU=1: PyTorch's CPU step too (fp32 and bf16; the others it
    # skips, saying why)
    if [ "${DG_TORCH:-0}" = 1 ] && [ -f "$out/bench/resnet.csv" ]; then
        PYTHONUNBUFFERED=1 timeout "${DG_TORCH_RESNET_LIMIT:-300}" python3 bench/peers/torch_resnet.py --out "$out/bench" \
            --dtype "$dtype" > "$out/torch_peer.log" 2>&1
        say "torch_peer: exit $? :: $(tail -12 "$out/torch_peer.log")"
        if [ "${DG_TORCH_CPU:-0}" = 1 ]; then
            PYTHONUNBUFFERED=1 timeout "${DG_TORCH_RESNET_LIMIT:-300}" python3 bench/peers/torch_resnet.py \
                --out "$out/bench" --device cpu --dtype "$dtype" > "$out/torch_peer_cpu.log" 2>&1
            say "torch_peer cpu: exit $? :: $(tail -8 "$out/torch_peer_cpu.log")"
        fi
    fi
    # PyTorch's host-device copies from pinned and pageable tensors, beside the ceiling's
    if [ "${DG_TORCH:-0}" = 1 ] && [ -f "$out/bench/ceiling.csv" ]; then
        PYTHONUNBUFFERED=1 timeout "${DG_TORCH_LIMIT:-150}" python3 bench/peers/torch_ops.py --out "$out/bench" \
            --no-ops --no-gemm --transfers > "$out/torch_transfer_peer.log" 2>&1
        say "torch transfers: exit $? :: $(grep -c ' ok$' "$out/torch_transfer_peer.log") ok rows"
    fi
    # PyTorch's scaled_dot_product_attention at the attention sweep's peer shapes
    if [ "${DG_TORCH:-0}" = 1 ] && [ -f "$out/bench/attention.csv" ]; then
        PYTHONUNBUFFERED=1 timeout "${DG_TORCH_LIMIT:-150}" python3 bench/peers/torch_attention.py --out "$out/bench" \
            --dtype "$dtype" > "$out/torch_attention_peer.log" 2>&1
        say "torch_attention_peer: exit $? :: $(tail -12 "$out/torch_attention_peer.log")"
    fi
    # DG_PEER_OPS=1: PyTorch's sgemm, softmax and sums at the gemm and ops
    # sweeps' shapes (torch_ops.csv; DG_PEER_OPS_ARGS: more options);
    # DG_PEER_MLP=1: NumPy's and PyTorch's CPU mlp step appended to mlp.csv,
    # as the main job does (DG_PEER_MLP_ARGS: bench/peers/numpy_mlp.py's);
    # DG_PEER_MLP_GPU=1: PyTorch's GPU mlp step, eager and as a CUDA graph
    # (torch_mlp.csv; DG_PEER_MLP_GPU_ARGS: bench/peers/torch_mlp.py's)
    if [ "${DG_PEER_OPS:-0}" = 1 ]; then
        PYTHONUNBUFFERED=1 timeout "${DG_TORCH_LIMIT:-150}" python3 bench/peers/torch_ops.py --out "$out/bench" \
            --dtype "$dtype" ${DG_PEER_OPS_ARGS:-} > "$out/torch_ops_peer.log" 2>&1
        say "torch_ops_peer: exit $? :: $(grep -c ' ok$' "$out/torch_ops_peer.log") ok rows"
    fi
    if [ "${DG_PEER_MLP:-0}" = 1 ] && [ -f "$out/bench/mlp.csv" ]; then
        PYTHONUNBUFFERED=1 timeout "${DG_TORCH_LIMIT:-150}" python3 bench/peers/numpy_mlp.py --out "$out/bench" \
            --dtype "$dtype" ${DG_PEER_MLP_ARGS:-} > "$out/numpy_mlp_peer.log" 2>&1
        say "numpy_mlp_peer: exit $? :: $(tail -2 "$out/numpy_mlp_peer.log" | tr '\n' ' ')"
    fi
    if [ "${DG_PEER_MLP_GPU:-0}" = 1 ]; then
        PYTHONUNBUFFERED=1 timeout "${DG_TORCH_LIMIT:-150}" python3 bench/peers/torch_mlp.py --out "$out/bench" \
            --dtype "$dtype" ${DG_PEER_MLP_GPU_ARGS:-} > "$out/torch_mlp_peer.log" 2>&1
        say "torch_mlp_peer: exit $? :: $(grep -c ' ok median' "$out/torch_mlp_peer.log") ok rows :: $(grep -v ' ok median' "$out/torch_mlp_peer.log" | tail -4)"
    fi
    # DG_PEER_DDP=1: PyTorch DDP's steps of the scaling sweep appended to
    # scaling.csv (DG_PEER_DDP_ARGS: bench/peers/torch_ddp.py's options)
    if [ "${DG_PEER_DDP:-0}" = 1 ] && [ -f "$out/bench/scaling.csv" ]; then
        PYTHONUNBUFFERED=1 timeout "${DG_TORCH_LIMIT:-150}" python3 bench/peers/torch_ddp.py --out "$out/bench" \
            ${DG_PEER_DDP_ARGS:-} > "$out/torch_ddp_peer.log" 2>&1
        say "torch_ddp_peer: exit $? :: $(tail -8 "$out/torch_ddp_peer.log")"
    fi
    # DG_PEER_CONV=1: PyTorch's convolutions (cuDNN, autotuned cuDNN, the
    # CPU's) of the conv sweep's rows appended to conv.csv, then the report
    # redrawn with them (DG_PEER_CONV_ARGS: bench/peers/torch_conv.py's
    # options; its --time-limit, 210 s by default, fits DG_PEER_CONV_LIMIT)
    if [ "${DG_PEER_CONV:-0}" = 1 ] && [ -f "$out/bench/conv.csv" ]; then
        PYTHONUNBUFFERED=1 timeout -s INT "${DG_PEER_CONV_LIMIT:-300}" python3 bench/peers/torch_conv.py \
            --out "$out/bench" ${DG_PEER_CONV_ARGS:-} > "$out/torch_conv_peer.log" 2>&1
        say "torch_conv_peer: exit $? :: $(tail -5 "$out/torch_conv_peer.log")"
        $bin/bench plot "$out/bench" > "$out/bench-plot.log" 2>&1
        say "bench plot with the conv peer's rows: exit $?"
    fi
    if [ -n "${DG_BEFORE:-}" ]; then
        $bin/bench compare --out "$out/compare.md" "$out/bench-before" "$out/bench" > "$out/compare.log" 2>&1
        say "compare: exit $? :: $(tail -1 "$out/compare.log")"
    fi
fi
# DG_PROFILE="mlp cnn ...": bench profile of each model on both backends,
# the ceilings measured once by the first; with nsys on the machine, one
# --run-once step of the first model under it, its NVTX ranges summarised
if [ -n "${DG_PROFILE:-}" ]; then
    ceil=""
    for model in $DG_PROFILE; do
        timeout -s INT "${DG_PROFILE_LIMIT:-200}" $bin/bench profile --model "$model" --backend both $ceil \
            ${DG_PROFILE_ARGS:-} --out "$out/profile" > "$out/profile-$model.log" 2>&1
        say "profile $model: exit $? :: $(grep -E '^step:|^== ' "$out/profile-$model.log" | tr '\n' ' ')"
        ceil="--ceilings $out/profile"
    done
    first=${DG_PROFILE%% *}
    if command -v nsys >/dev/null 2>&1; then
        nsys profile --trace=cuda,nvtx --force-overwrite true -o "$out/nsys-$first" $bin/bench profile --model "$first" \
            --backend gpu --run-once --out "$out/nsys-run" > "$out/nsys.log" 2>&1
        nsys stats --report nvtx_sum --format csv "$out/nsys-$first.nsys-rep" > "$out/nsys-nvtx.csv" 2>&1
        say "nsys: $(grep -c . "$out/nsys-nvtx.csv") lines of NVTX ranges :: $(head -4 "$out/nsys-nvtx.csv" | tr '\n' ' ')"
    else
        say "nsys: not on this machine"
    fi
fi
if [ "${DG_TRAIN:-0}" = 1 ]; then
    for model in logreg mlp; do
        for be in cpu gpu; do
            $bin/bench train --model "$model" --backend "$be" --epochs 10 --data .gpu/data --out "$out/bench" \
                > "$out/train-$model-$be.log" 2>&1
            say "train $model $be: exit $? :: $(tail -1 "$out/train-$model-$be.log")"
        done
    done
    $bin/bench train --model mlp --backend gpu --epochs 3 --copy-batches --data .gpu/data --out "$out/bench" \
        > "$out/train-mlp-gpu-copy.log" 2>&1
    say "train mlp gpu copy-batches: exit $? :: $(tail -1 "$out/train-mlp-gpu-copy.log")"
fi
# DG_TRAIN_GPUS=N: Fashion-MNIST data-parallel on N GPUs and on one GPU
# with the same global batch (DG_TRAIN_GPUS_ARGS: more options)
if [ -n "${DG_TRAIN_GPUS:-}" ]; then
    for g in 1 "$DG_TRAIN_GPUS"; do
        timeout -s INT "${DG_TRAIN_GPUS_LIMIT:-150}" $bin/bench train --model mlp --backend gpu --gpus "$g" \
            --data .gpu/data ${DG_TRAIN_GPUS_ARGS:-} --out "$out/bench" > "$out/train-mlp-gpus$g.log" 2>&1
        say "train mlp --gpus $g: exit $? :: $(tail -2 "$out/train-mlp-gpus$g.log" | tr '\n' ' ')"
    done
fi
# DG_CHARLM=1: the character-level language model on both backends from one
# seed (DG_CHARLM_ARGS: more options; the CPU gets DG_CHARLM_CPU_STEPS)
if [ "${DG_CHARLM:-0}" = 1 ]; then
    for be in gpu cpu; do
        steps=${DG_CHARLM_STEPS:-1500}
        [ "$be" = cpu ] && steps=${DG_CHARLM_CPU_STEPS:-300}
        timeout -s INT "${DG_CHARLM_LIMIT:-200}" $bin/bench train --model charlm --backend "$be" --steps "$steps" \
            ${DG_CHARLM_ARGS:-} --out "$out/bench" > "$out/train-charlm-$be.log" 2>&1
        say "train charlm $be: exit $? :: $(head -1 "$out/train-charlm-$be.log") :: $(tail -1 "$out/train-charlm-$be.log")"
    done
fi
tar -C "$work" -czf "${OUT:-.}/gpu-results.tgz" results
cat "$summary_file"
