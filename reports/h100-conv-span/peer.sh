#!/bin/sh
# Fourth call, on the H100's host: PyTorch's CPU convolution beside the
# span unfolding (new), which the first two calls ran
# without it. The conv sweep's cpu-im2col-batch rows of the CIFAR layers
# at batch 32 by new, PyTorch's rows of the same layers appended to that
# folder (bench/torch_conv_peer.py), then new again. Results under
# $OUT/span.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu/lib OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=active
r=$OUT/span
mkdir -p $r
for i in 1 2; do
    timeout 60 .gpu/bin/bench --sweep conv --backends cpu --impl cpu-im2col-batch --case 'r18c-*' --sizes conv=32 \
        --cpu-cap 3 --out $r/conv-$i-new > $r/conv-$i-new.log 2>&1
    echo "conv $i exit $?"
    if [ $i = 1 ]; then
        timeout 150 python3 bench/torch_conv_peer.py --out $r/conv-1-new --devices cpu --filter r18c --batches 32 \
            --time-limit 130 > $r/torch-conv.log 2>&1
        echo "torch conv exit $?: $(tail -2 $r/torch-conv.log | head -1)"
    fi
done
for l in l1.0-conv1 l2.0-conv2 l3.0-conv2; do
    for f in $r/conv-1-new/conv.csv $r/conv-2-new/conv.csv; do
        grep -v '^#' $f | awk -F, -v l="r18c-$l" 'index($2, l) == 1 {printf "%s %s %.0f | ", $2, $3, $20}'
    done
    echo
done
