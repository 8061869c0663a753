#!/bin/sh
# First call, on the H100's host: test_conv; the CPU sgemm ceiling; the
# conv sweep's cpu-im2col-batch and cpu-shift rows of the stride-1 3x3
# layers (CIFAR stem and stages, ImageNet 56x56 and 28x28) at batches 8
# and 32, as batch, shift, shift, batch (one binary); PyTorch's CPU
# convolution of the CIFAR layers at batch 32 appended to the first
# shift folder. Results under $OUT/shift; the caller tars them.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu/lib OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=active
r=$OUT/shift
mkdir -p $r
.gpu/bin/test_conv --jobs 4 > $r/test_conv.log 2>&1
echo "test_conv exit $?: $(grep Synthesis $r/test_conv.log)"
timeout 60 .gpu/bin/bench --sweep ceiling --backends cpu --out $r/ceiling > $r/ceiling.log 2>&1
echo "ceiling exit $?: $(grep -v '^#' $r/ceiling/ceiling.csv | awk -F, '$2 ~ /sgemm/ {print $2, $20}' | tr '\n' ' ')"
cases='r18c-stem*,r18c-l1.0-conv1*,r18c-l2.0-conv2*,r18c-l3.0-conv2*,r18c-l4.0-conv2*,r18i-l1.0-conv1*,r18i-l2.0-conv2*'
i=0
for impl in cpu-im2col-batch cpu-shift cpu-shift cpu-im2col-batch; do
    i=$((i+1))
    timeout 120 .gpu/bin/bench --sweep conv --backends cpu --impl $impl --case "$cases" --sizes conv=8,32 \
        --cpu-cap 3 --out $r/conv-$i-$impl > $r/conv-$i-$impl.log 2>&1
    echo "conv $i $impl exit $?: $(grep -vc '^#' $r/conv-$i-$impl/conv.csv) lines"
    if [ $i = 2 ]; then
        timeout 150 python3 bench/torch_conv_peer.py --out $r/conv-2-cpu-shift --devices cpu --filter r18c \
            --batches 32 --time-limit 130 > $r/torch-conv.log 2>&1
        echo "torch conv exit $?: $(tail -2 $r/torch-conv.log | head -1)"
    fi
done
echo "GFLOP/s at batch 32 (runs 1-4; PyTorch in run 2):"
for l in r18c-l1.0-conv1 r18c-l2.0-conv2 r18c-l3.0-conv2 r18i-l1.0-conv1 r18i-l2.0-conv2; do
    for d in fwd bwd-data bwd-weight; do
        printf '%s:%s ' $l $d
        for f in $r/conv-*/conv.csv; do
            grep -v '^#' $f | awk -F, -v c="$l:$d" '$2 == c && $9 == 32 {printf "%s %s %.0f | ", $3, $27, $20}'
        done
        echo
    done
done
