#!/bin/sh
# First call, on the H100's host: test_conv; the CPU sgemm ceiling; the
# conv sweep's weight-gradient rows of the stride-1 3x3 layers (CIFAR and
# ImageNet stages) at batch 32 by the four CPU strategies, in the order
# passes, batch, chan, shift, then rotated, three rounds (one binary);
# PyTorch's CPU weight gradients at batch 32 after the first round,
# appended to its chan folder. Results under $OUT/chan; the caller tars
# them.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu/lib OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=active
r=$OUT/chan
mkdir -p $r
.gpu/bin/test_conv --jobs 4 > $r/test_conv.log 2>&1
echo "test_conv exit $?: $(grep Synthesis $r/test_conv.log)"
timeout 60 .gpu/bin/bench --sweep ceiling --backends cpu --out $r/ceiling > $r/ceiling.log 2>&1
echo "ceiling exit $?: $(grep -v '^#' $r/ceiling/ceiling.csv | awk -F, '$2 ~ /sgemm/ {print $2, $20}' | tr '\n' ' ')"
cases='r18c-l1.0-conv1:bwd-weight,r18c-l2.0-conv2:bwd-weight,r18c-l3.0-conv2:bwd-weight,r18c-l4.0-conv2:bwd-weight'
cases="$cases,r18i-l1.0-conv1:bwd-weight,r18i-l2.0-conv2:bwd-weight,r18i-l3.0-conv2:bwd-weight,r18i-l4.0-conv2:bwd-weight"
i=0
for impl in cpu-im2col cpu-im2col-batch cpu-im2col-chan cpu-shift \
            cpu-im2col-chan cpu-shift cpu-im2col cpu-im2col-batch \
            cpu-shift cpu-im2col-batch cpu-im2col-chan cpu-im2col; do
    i=$((i+1))
    timeout 60 .gpu/bin/bench --sweep conv --backends cpu --impl $impl --case "$cases" --sizes conv=32 \
        --cpu-cap 3 --out $r/conv-$i-$impl > $r/conv-$i-$impl.log 2>&1
    echo "conv $i $impl exit $?: $(grep -v '^#' $r/conv-$i-$impl/conv.csv | awk -F, 'NR > 1 {printf "%.0f ", $20}')"
    if [ $i = 3 ]; then
        timeout 170 python3 bench/torch_conv_peer.py --out $r/conv-3-cpu-im2col-chan --devices cpu \
            --filter bwd-weight --batches 32 --time-limit 150 > $r/torch-conv.log 2>&1
        echo "torch conv exit $?: $(tail -2 $r/torch-conv.log | head -1)"
    fi
done
echo "dw GFLOP/s at batch 32 by run (impl status GFLOP/s):"
for l in r18c-l1.0-conv1 r18c-l2.0-conv2 r18c-l3.0-conv2 r18c-l4.0-conv2 r18i-l1.0-conv1 r18i-l2.0-conv2 \
         r18i-l3.0-conv2 r18i-l4.0-conv2; do
    printf '%s: ' $l
    for f in $r/conv-*/conv.csv; do
        grep -v '^#' $f | awk -F, -v c="$l:bwd-weight" '$2 == c && $9 == 32 {printf "%s %s %.0f | ", $3, $27, $20}'
    done
    echo
done
