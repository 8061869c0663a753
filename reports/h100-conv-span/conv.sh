#!/bin/sh
# First call, on the H100's host: the span unfolding and the lane sums
# (new) against 7336748 (old, .gpu/bin/bench-old). test_conv; the conv
# sweep's rows of the CIFAR layers at batches 8 and 32, cpu-im2col-batch by
# old, new, new, old, then cpu-im2col (the passes) by old and new. Results
# under $OUT/span; the caller tars them.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu/lib OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=active
r=$OUT/span
mkdir -p $r
.gpu/bin/test_conv --jobs 4 > $r/test_conv.log 2>&1
echo "test_conv exit $?: $(grep Synthesis $r/test_conv.log)"
i=0
for run in batch:old batch:new batch:new batch:old passes:old passes:new; do
    i=$((i+1))
    how=${run%%:*} b=${run##*:}
    impl=cpu-im2col-batch; [ $how = passes ] && impl=cpu-im2col
    bin=.gpu/bin/bench; [ $b = old ] && bin=.gpu/bin/bench-old
    timeout 100 $bin --sweep conv --backends cpu --impl $impl --case 'r18c-*' --sizes conv=8,32 \
        --cpu-cap 3 --out $r/conv-$i-$how-$b > $r/conv-$i-$how-$b.log 2>&1
    echo "conv $i $how $b exit $?: $(grep -vc '^#' $r/conv-$i-$how-$b/conv.csv) lines"
done
