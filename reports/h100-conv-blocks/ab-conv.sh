#!/bin/sh
# The CPU convolution in column blocks against the whole-image slots, on the
# H100's host, in one call: test_conv; the ceiling; one thread's sgemm on the
# per-image and per-block GEMM shapes; the conv sweep's cpu-im2col-batch rows
# by the bench of 806d664 (old, whole images) and this one (new, blocks)
# alternately, old new new old; the ResNet-18 CIFAR CPU step the same way;
# and bench profile of that step on the CPU. The caller tars $OUT/blocks.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu/lib OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=active
r=$OUT/blocks
mkdir -p $r
lscpu > $r/lscpu.txt 2>&1
.gpu/bin/test_conv --jobs 4 > $r/test_conv.log 2>&1
echo "test_conv exit $?: $(grep Synthesis $r/test_conv.log)"
.gpu/bin/bench --sweep ceiling --backends cpu --out $r/ceiling > $r/ceiling.log 2>&1
echo "ceiling: $(grep -v '^#' $r/ceiling/ceiling.csv | cut -d, -f2,3,20 | tr '\n' ' ')"
# fwd 32x32 and 56x56, a 280-column block, dx (R x cols = W^T dy), dw (dy col^T)
.gpu/bin/bench --sweep gemm --backends cpu --impl cpu-openblas --threads 1 \
    --shapes 64x1024x576:NN,64x3136x576:NN,64x280x576:NN,576x1024x64:TN,576x280x64:TN,64x576x1024:NT,64x576x280:NT \
    --out $r/gemm-1thread > $r/gemm-1thread.log 2>&1
echo "gemm 1 thread: $(grep -v '^#' $r/gemm-1thread/gemm.csv | cut -d, -f2,20 | tail -n +2 | tr '\n' ' ')"
cases='r18c-l1.0-conv1*,r18i-l1.0-conv1*,r18i-l2.0-conv1*,r18i-l2.0-conv2*,r18c-l2.0-conv2*,r18i-l3.0-conv2*,r18c-stem*,r18i-stem*,cnn-conv1*'
i=0
for b in old new new old; do
    i=$((i+1))
    bin=.gpu/bin/bench; [ $b = old ] && bin=.gpu/bin/bench-old806
    timeout 120 $bin --sweep conv --backends cpu --impl cpu-im2col-batch --case "$cases" --sizes conv=32,128 \
        --cpu-cap 3 --out $r/conv-$i-$b > $r/conv-$i-$b.log 2>&1
    echo "conv round $i $b exit $?: $(grep -vc '^#' $r/conv-$i-$b/conv.csv) lines"
done
i=0
for b in old new new old; do
    i=$((i+1))
    bin=.gpu/bin/bench; [ $b = old ] && bin=.gpu/bin/bench-old806
    timeout 70 $bin --sweep resnet --backends cpu --impl 'cpu*' --case 'resnet18-cifar' --sizes resnet=32 --cpu-cap 20 \
        --out $r/resnet-$i-$b > $r/resnet-$i-$b.log 2>&1
    echo "resnet round $i $b exit $?: $(grep -v '^#' $r/resnet-$i-$b/resnet.csv | cut -d, -f2,3,9,16,27 | tail -n +2 | tr '\n' ' ')"
done
timeout 90 .gpu/bin/bench profile --model resnet18-cifar --backend cpu --ceilings $r/ceiling --out $r/profile \
    > $r/profile.log 2>&1
echo "profile exit $?"

