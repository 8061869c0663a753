#!/bin/sh
# Second call, on the H100's host: new (the span unfolding and the lane
# sums) against 7336748 (old, .gpu/bin/bench-old). The conv sweep's
# cpu-im2col-batch rows of three CIFAR 3x3 layers at batch 32 by old and
# new alternately, 4 times each (the first call's rows spread by up to
# 30% from run to run); bench profile of the ResNet-18 CIFAR CPU step at
# batch 32 by new and old; the step by old, new, new, old at batches 8
# and 32, PyTorch's CPU step after each pair (bench/torch_peer.py).
# Results under $OUT/span; the caller tars them.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu/lib OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=active
r=$OUT/span
mkdir -p $r
i=0
for b in old new old new new old new old; do
    i=$((i+1))
    bin=.gpu/bin/bench; [ $b = old ] && bin=.gpu/bin/bench-old
    timeout 40 $bin --sweep conv --backends cpu --impl cpu-im2col-batch \
        --case 'r18c-l1.0-conv1*,r18c-l2.0-conv2*,r18c-l3.0-conv2*' --sizes conv=32 --cpu-cap 3 \
        --out $r/conv-$i-$b > $r/conv-$i-$b.log 2>&1
    echo "conv $i $b exit $?: $(grep -v '^#' $r/conv-$i-$b/conv.csv | cut -d, -f2,20 | tail -n +2 | tr '\n' ' ')"
done
for b in new old; do
    bin=.gpu/bin/bench; [ $b = old ] && bin=.gpu/bin/bench-old
    timeout 60 $bin profile --model resnet18-cifar --backend cpu --batch 32 --out $r/profile-$b-b32 \
        > $r/profile-$b-b32.log 2>&1
    echo "profile $b exit $?"; grep -E '^resnet18-cifar,cpu,32,op,(conv2d|batch_norm)' $r/profile-$b-b32/profile-resnet18-cifar-cpu-ops.csv | cut -d, -f5,7
done
i=0
for b in old new new old; do
    i=$((i+1))
    bin=.gpu/bin/bench; [ $b = old ] && bin=.gpu/bin/bench-old
    timeout 70 $bin --sweep resnet --backends cpu --impl 'cpu*' --case 'resnet18-cifar' --sizes resnet=8,32 \
        --cpu-cap 20 --reps 10 --out $r/resnet-$i-$b > $r/resnet-$i-$b.log 2>&1
    echo "resnet $i $b exit $?: $(grep -v '^#' $r/resnet-$i-$b/resnet.csv | cut -d, -f3,9,16,27 | tail -n +2 | tr '\n' ' ')"
    if [ $((i % 2)) = 0 ]; then
        timeout 90 python3 bench/torch_peer.py --device cpu --out $r/resnet-$i-$b --batches-cifar 8,32 \
            --batches-imagenet 8 > $r/torch-$i.log 2>&1
        echo "torch after $i exit $?: $(grep -v '^#' $r/resnet-$i-$b/resnet.csv | grep torch | cut -d, -f2,9,16,27 | tr '\n' ' ')"
    fi
done
