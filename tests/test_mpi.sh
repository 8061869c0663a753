#!/bin/sh
# test_mpi.sh BENCH MPI_TRAIN CUDA: the ranks of bench train under
# `mpirun -np 2 --oversubscribe` (two ranks on CI's two cores).
#  - mpi_train (tests/mpi_train.c): the all_reduce node against a host
#    mean; an MLP's parameters after 8 steps with bench train's all-reduce
#    (MPI_Iallreduce per bucket, overlapping the backward) identical on
#    both ranks and equal to one process's on the same global batches (its
#    tolerance is stated there), and the blocking all-reduce's equal to the
#    overlapped one's bit for bit.
#  - Faults, each a non-zero exit with the failing rank's message within
#    the timeout (no rank left waiting): a bad option on rank 1 alone,
#    another configuration on rank 1 (the start-up comparison), a batch
#    the ranks cannot split evenly, a rank whose data set is missing (it
#    fails after the start, while rank 0 goes on), --gpus under MPI,
#    --allreduce blocking on rank 1 alone, --allreduce for GPU ranks or
#    (no mpirun) for one process, an --allreduce of neither kind.
#  - The scaling sweep's CPU rows (bench --sweep scaling --backends cpu)
#    on 2 ranks in fp32 and bf16: rank 0's file alone, rows for 1 and 2
#    ranks (2: the all-reduce blocking and overlapped) checked against one
#    process in the same precision (bf16: with its policy and its own
#    tolerance, in the check column) and timed as the slowest rank, the
#    hosts named;
#    a plan over the memory limit on rank 1 alone (of 3), another command line
#    on rank 1, and another sweep under MPI each end every rank with the
#    message.
#  - The scaling sweep's GPU rows under MPI (--backends gpu): with no GPU
#    (CUDA_VISIBLE_DEVICES empty, or a bench without CUDA) every rank ends
#    with the reason. CUDA "ON" and a GPU (nvidia-smi -L): 2 ranks on one
#    visible GPU are refused naming both counts; a rank without a GPU
#    beside one with it is refused naming it; one rank (-np 1) runs every
#    GPU row end to end in fp32 and bf16 (each checked against float64,
#    the step replayed as a CUDA graph, the host and device named); a plan
#    over the memory limit ends it with the message. With 2 GPUs: 2 ranks,
#    the rows on 2 checked against one process (mpi=one-process; ResNet-18
#    mpi=mean-of-slices), averaged by NCCL, timed as the slowest rank, and
#    a plan over the memory limit on rank 1 alone ending both.
#  - With Fashion-MNIST installed: 2 ranks train the MLP as one process
#    does (the same per-epoch losses), rank 0 alone writes, its file names
#    both ranks' hosts, times the slowest rank and names the all-reduce
#    (the default overlapped, then --allreduce blocking). CUDA "ON" and 2 GPUs
#    (nvidia-smi -L): the same with --backend gpu, one GPU per rank (NCCL).
# MPI_TRAIN "none": a bench built without MPI, which must refuse a launch
# by MPI with the reason; then the test skips (77), as where mpirun is
# missing.
set -u
bench=$1 mpi_train=$2 cuda=${3:-OFF}
if [ "$mpi_train" = none ]; then
    out=$(OMPI_COMM_WORLD_SIZE=2 "$bench" train --epochs 1 2>&1)
    rc=$?
    if [ $rc -eq 0 ] || ! echo "$out" | grep -q "built without MPI"; then
        echo "FAIL: a bench without MPI launched by MPI: exit $rc: $out"
        exit 1
    fi
    echo "skipped: bench built without MPI (DG_MPI=OFF or no libopenmpi-dev); it refuses a launch by MPI"
    exit 77
fi
if ! command -v mpirun >/dev/null 2>&1; then
    echo "skipped: no mpirun (apt-get install openmpi-bin)"
    exit 77
fi
# Open MPI refuses root unless told; CI's containers run as root
if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMP_WAIT_POLICY=PASSIVE
tmp=$(mktemp -d /tmp/dg-mpi-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
mpi() { timeout 120 mpirun --oversubscribe "$@"; }

mpi -np 2 "$mpi_train" >"$tmp/train.out" 2>"$tmp/train.err"
rc=$?
[ $rc -eq 0 ] || fail "mpi_train: exit $rc: $(cat "$tmp/train.err")"
grep -q "parameters identical across ranks" "$tmp/train.out" || fail "mpi_train said: $(cat "$tmp/train.out")"
cat "$tmp/train.out"

# refused: every case exits non-zero, within the timeout, with its message
# ($1 the case, $2 the message, then mpirun's arguments)
refused() {
    what=$1 want=$2
    shift 2
    mpi "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc -eq 124 ]; then fail "$what: still running after 120 s"
    elif [ $rc -eq 0 ]; then fail "$what: exit 0"
    elif ! grep -q -- "$want" "$tmp/err"; then fail "$what: exit $rc without '$want': $(cat "$tmp/err")"
    fi
}
args="train --epochs 1 --subset 512 --batch 64 --threads 1 --out $tmp/refused"
# shellcheck disable=SC2086 # $args are separate words
refused "a bad option on rank 1 alone" "bad --epochs (1 to 10000) '0'" \
    -np 1 "$bench" $args : -np 1 "$bench" $args --epochs 0
# shellcheck disable=SC2086
refused "another configuration on rank 1" "rank 1 runs another build or configuration than rank 0" \
    -np 1 "$bench" $args : -np 1 "$bench" $args --lr 0.002
# shellcheck disable=SC2086
refused "an uneven batch" "batch 63 does not split evenly over 2 MPI ranks" -np 2 "$bench" $args --batch 63
# shellcheck disable=SC2086
refused "a missing data set on rank 1" "$tmp/nowhere" \
    -np 1 "$bench" $args : -np 1 "$bench" $args --data "$tmp/nowhere"
# shellcheck disable=SC2086
refused "--gpus under MPI" "under MPI each rank drives one device: no --gpus" -np 2 "$bench" $args --backend gpu --gpus 2
# shellcheck disable=SC2086
refused "--allreduce blocking on rank 1 alone" "rank 1 runs another build or configuration than rank 0" \
    -np 1 "$bench" $args : -np 1 "$bench" $args --allreduce blocking
# shellcheck disable=SC2086
refused "--allreduce for GPU ranks" "GPU ranks average by NCCL" -np 2 "$bench" $args --backend gpu --allreduce blocking
# shellcheck disable=SC2086
"$bench" $args --allreduce blocking >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -ne 2 ] || ! grep -q -- "--allreduce chooses how CPU ranks under MPI average their gradients: not launched by MPI" \
    "$tmp/err"; then
    fail "--allreduce without mpirun: exit $rc: $(cat "$tmp/err")"
fi
# shellcheck disable=SC2086
mpi -np 2 "$bench" $args --allreduce sometimes >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -ne 2 ] || ! grep -q -- "bad --allreduce (overlapped or blocking) 'sometimes'" "$tmp/err"; then
    fail "--allreduce sometimes: exit $rc: $(cat "$tmp/err")"
fi
[ -e "$tmp/refused" ] && [ -n "$(ls "$tmp/refused")" ] && fail "a refused run left files: $(ls "$tmp/refused")"

# the scaling sweep's CPU rows on 2 ranks: rank 0 alone writes (rank 1's
# files go to a folder of its own under TMPDIR, removed as it ends), rows
# for 1 and 2 ranks, weak and strong, each checked ("mpi=one-process": the
# ranks' parameters after the steps against one process's on the same
# global batch) and timed as the slowest rank, every rank's host named
mkdir "$tmp/rankdirs"
sweep="--sweep scaling --backends cpu --threads 1 --warmup 1 --reps 3"
# shellcheck disable=SC2086
TMPDIR=$tmp/rankdirs mpi -np 2 "$bench" $sweep --dtype fp32,bf16 --out "$tmp/sweep" >"$tmp/sweep.out" \
    2>"$tmp/sweep.err" ||
    fail "the scaling sweep on 2 ranks: exit $?: $(cat "$tmp/sweep.err")"
csv=$tmp/sweep/scaling.csv
grep -q "^# ranks: 2 (MPI, one process each): rank 0 [^,]* cpu, rank 1 [^,]* cpu$" "$csv" ||
    fail "no ranks' hosts in $csv"
for row in mlp-weak,cpu-mpi,1 mlp-strong,cpu-mpi,1 mlp-weak,cpu-mpi,2 mlp-strong,cpu-mpi,2 \
    mlp-weak,cpu-mpi-overlap,2 mlp-strong,cpu-mpi-overlap,2 charlm-weak,cpu-mpi,1 charlm-strong,cpu-mpi,1 \
    charlm-weak,cpu-mpi,2 charlm-strong,cpu-mpi,2 charlm-weak,cpu-mpi-overlap,2 charlm-strong,cpu-mpi-overlap,2; do
    case=${row%%,*} ranks=${row##*,} impl=${row#*,}
    impl=${impl%,*}
    check=f64-step@b2
    [ "$ranks" -eq 2 ] && check=mpi=one-process
    grep -q "^scaling,$case,$impl,cpu,fp32,$ranks,.*,$check,ok,.*slowest rank [01]; median over $ranks ranks " \
        "$csv" || fail "no checked $case $impl row on $ranks ranks in $csv: $(grep -v '^#' "$csv")"
    # bf16: the same rows, checked against float64 and one process in bf16
    # (sweep_scaling_mpi.c states the tolerances), the graph in bf16
    check="f64-step@b2+bf16-policy tol 0.02/0.15"
    [ "$ranks" -eq 2 ] && check="mpi=one-process+bf16-policy tol 0.01"
    grep -q "^scaling,$case,$impl,cpu,bf16,$ranks,.*,$check,\(ok\|noisy\),.*slowest rank [01]; median over $ranks" \
        "$csv" || fail "no checked bf16 $case $impl row on $ranks ranks in $csv: $(grep -v '^#' "$csv")"
done
[ -z "$(ls "$tmp/rankdirs")" ] || fail "rank 1 left $(ls "$tmp/rankdirs") behind"
# 3 ranks: rank 1 fails in its first row (2 ranks), whose collectives rank
# 0 waits in, while rank 2 waits in those of the next: only ending them
# all stops the run
# shellcheck disable=SC2086
refused "the sweep: a plan over the memory limit on rank 1 alone" "rank 1 of 3: plan predicted" \
    -np 1 "$bench" $sweep --out "$tmp/refused" : -np 1 env DG_BENCH_MEM_LIMIT=1000 "$bench" $sweep \
    --out "$tmp/refused" : -np 1 "$bench" $sweep --out "$tmp/refused"
# shellcheck disable=SC2086
refused "the sweep: another command line on rank 1" "rank 1 runs another build or configuration than rank 0" \
    -np 1 "$bench" $sweep --out "$tmp/refused" : -np 1 "$bench" $sweep --reps 4 --out "$tmp/refused"
refused "another sweep under MPI" "under MPI only the scaling sweep runs" \
    -np 2 "$bench" --sweep gemm --backends cpu --out "$tmp/refused"
[ -e "$tmp/refused/scaling.csv" ] && fail "a refused sweep left $tmp/refused/scaling.csv"

# the GPU rows under MPI: no GPU on any rank ends every rank with the reason
gsweep="--sweep scaling --warmup 1 --reps 3"
# shellcheck disable=SC2086
refused "the GPU rows without a GPU" "no backend to run on" \
    -np 2 env CUDA_VISIBLE_DEVICES= "$bench" $gsweep --backends gpu --out "$tmp/refused"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "$cuda" = ON ] && [ "$gpus" -ge 1 ]; then
    # shellcheck disable=SC2086
    refused "2 GPU ranks on 1 GPU" "2 ranks on host [^ ]*, which has 1 CUDA device: the GPU rows take one GPU" \
        -np 2 env CUDA_VISIBLE_DEVICES=0 "$bench" $gsweep --backends gpu --out "$tmp/refused"
    # shellcheck disable=SC2086
    refused "a GPU rank beside one without" "rank 1 has no GPU (its reason above) while other ranks have one" \
        -np 1 "$bench" $gsweep --backends cpu,gpu --out "$tmp/refused" : \
        -np 1 env CUDA_VISIBLE_DEVICES= "$bench" $gsweep --backends cpu,gpu --out "$tmp/refused"
    # shellcheck disable=SC2086
    refused "a GPU rank over the memory limit" "rank 0 of 1: plan predicted" \
        -np 1 env DG_BENCH_MEM_LIMIT=1000 "$bench" $gsweep --backends gpu --out "$tmp/refused"
    [ -e "$tmp/refused/scaling.csv" ] && fail "a refused GPU sweep left $tmp/refused/scaling.csv"
    # $1 ranks, one GPU each, every model weak and strong in fp32 and bf16
    gpu_ranks() {
        n=$1
        # shellcheck disable=SC2086
        timeout 900 mpirun --oversubscribe -np "$n" "$bench" $gsweep --backends gpu --dtype fp32,bf16 \
            --out "$tmp/gpu$n" >"$tmp/gpu.out" 2>"$tmp/gpu.err" ||
            fail "the GPU rows on $n ranks: exit $?: $(cat "$tmp/gpu.err")"
        csv=$tmp/gpu$n/scaling.csv
        grep -q "^# ranks: $n (MPI, one process each): rank 0 [^,]* gpu 0" "$csv" || fail "no ranks' hosts in $csv"
        [ "$(grep -c '^scaling,.*,gpu-dp' "$csv")" -eq 0 ] || fail "one-process rows under MPI in $csv"
        for model in mlp resnet18-cifar charlm; do
            for case in $model-weak $model-strong; do
                for r in 1 $n; do
                    check=f64-step@b2
                    [ $model = charlm ] && check=f64-step@b2t64
                    if [ "$r" -gt 1 ]; then
                        check=mpi=one-process
                        [ $model = resnet18-cifar ] && check=mpi=mean-of-slices
                    fi
                    want="^scaling,$case,gpu-mpi,gpu,fp32,$r,.*,${check}[^,]*,\(ok\|noisy\),.*replayed as a CUDA graph"
                    grep -q "$want" "$csv" ||
                        fail "no checked fp32 $case row on $r GPU ranks in $csv: $(grep -v '^#' "$csv")"
                    grep -q "^scaling,$case,gpu-mpi,gpu,bf16,$r,.*,${check}+bf16-policy[^,]*,\(ok\|noisy\)," \
                        "$csv" || fail "no checked bf16 $case row on $r GPU ranks in $csv: $(grep -v '^#' "$csv")"
                done
            done
        done
        [ "$n" -gt 1 ] && ! grep -q "^scaling,mlp-weak,gpu-mpi,gpu,fp32,$n,.*NCCL across $n processes.*slowest rank" \
            "$csv" && fail "no NCCL or slowest rank in the $n-rank rows of $csv"
    }
    gpu_ranks 1
    if [ "$gpus" -ge 2 ]; then
        gpu_ranks 2
        # shellcheck disable=SC2086
        refused "a GPU rank over the memory limit on rank 1 alone" "rank 1 of 2: plan predicted" \
            -np 1 "$bench" $gsweep --backends gpu --out "$tmp/refused" : \
            -np 1 env DG_BENCH_MEM_LIMIT=1000 "$bench" $gsweep --backends gpu --out "$tmp/refused"
    else echo "skipped the GPU rows on 2 ranks: $gpus GPU (2 needed)"
    fi
else
    echo "skipped the GPU rows under MPI: bench CUDA $cuda, $gpus GPUs (1 needed)"
fi

# two ranks of backend $1 against one process, on Fashion-MNIST: the same
# losses, one file from rank 0 alone, both hosts named, the slowest timed,
# the all-reduce named ($2: overlapped, blocking or nccl; $3: its option)
against_one() {
    be=$1 exchange=$2
    run="train --backend $be --epochs 2 --subset 2048 --batch 64 --threads 1"
    rm -rf "$tmp/two-$be" "$tmp/one-$be"
    # shellcheck disable=SC2086
    mpi -np 2 "$bench" $run ${3:-} --out "$tmp/two-$be" >"$tmp/two.out" 2>"$tmp/two.err" ||
        fail "2 $be ranks on Fashion-MNIST: $(cat "$tmp/two.err")"
    # shellcheck disable=SC2086
    "$bench" $run --out "$tmp/one-$be" >/dev/null 2>"$tmp/one.err" || fail "one $be process: $(cat "$tmp/one.err")"
    two=$tmp/two-$be/train-mlp-$be-mpi2.csv
    [ "$(ls "$tmp/two-$be")" = "train-mlp-$be-mpi2.csv" ] || fail "2 $be ranks wrote $(ls "$tmp/two-$be"), not one file"
    grep -q "^# ranks: 2 (MPI, one process each): rank 0 [^,]* ${be}[^,]*, rank 1 " "$two" ||
        fail "no ranks' hosts and devices in $two"
    grep -q "^1,mlp,$be-mpi2,.*,slowest rank [01]; epoch_s over 2 ranks .*; all-reduce $exchange\$" "$two" ||
        fail "no slowest rank or all-reduce $exchange in $two: $(grep '^1,' "$two")"
    # the losses (column 10) of both runs agree to 1e-4: float32 summation order apart, one process's
    grep -v '^#' "$two" | awk -F, 'NR > 1 { print $10 }' >"$tmp/l2"
    grep -v '^#' "$tmp/one-$be/train-mlp-$be.csv" | awk -F, 'NR > 1 { print $10 }' >"$tmp/l1"
    paste -d' ' "$tmp/l2" "$tmp/l1" |
        awk '{ d = $1 - $2; if (d < 0) d = -d; if (NF != 2 || d > 1e-4 * $2) { print "epoch " NR ": " $0; bad = 1 } }
             END { exit bad }' || fail "2 $be ranks' losses ($exchange) differ from one process's"
}

if [ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    against_one cpu overlapped
    against_one cpu blocking "--allreduce blocking"
    if [ "$cuda" = ON ] && [ "$gpus" -ge 2 ]; then against_one gpu nccl
    else echo "skipped the GPU ranks: bench CUDA $cuda, $gpus GPUs (2 needed)"
    fi
else
    echo "skipped the Fashion-MNIST run: not installed (dataset-fashion-mnist)"
fi
[ $fails -eq 0 ] && echo "test_mpi: all passed"
exit $((fails > 0))
