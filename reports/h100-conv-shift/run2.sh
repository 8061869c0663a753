#!/bin/sh
# Second call, on the H100's host: DEFAULT now runs the forward and dx of
# the 64- and 128-channel 3x3 layers shifted (new) against b133cd0 (old,
# .gpu/bin/bench-old: the batch strategy there). The conv sweep's
# cpu-im2col-batch and cpu-shift rows of three layers at batch 32,
# alternately, 3 times each; bench profile of the ResNet-18 CIFAR CPU step
# at batch 32 by new, old, new, old; the step by old, new, new, old at
# batches 8 and 32, PyTorch's CPU step after each pair
# (bench/torch_peer.py). Results under $OUT/shift; the caller tars them.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu/lib OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=active
r=$OUT/shift
mkdir -p $r
i=0
for impl in cpu-im2col-batch cpu-shift cpu-im2col-batch cpu-shift cpu-im2col-batch cpu-shift; do
    i=$((i+1))
    timeout 40 .gpu/bin/bench --sweep conv --backends cpu --impl $impl \
        --case 'r18c-l1.0-conv1*,r18c-l2.0-conv2*,r18i-l1.0-conv1*' --sizes conv=32 --cpu-cap 3 \
        --out $r/conv-$i-$impl > $r/conv-$i-$impl.log 2>&1
    echo "conv $i $impl exit $?: $(grep -v '^#' $r/conv-$i-$impl/conv.csv | awk -F, 'NR > 1 {printf "%s %.0f ", $2, $20}')"
done
i=0
for b in new old new old; do
    i=$((i+1))
    bin=.gpu/bin/bench; [ $b = old ] && bin=.gpu/bin/bench-old
    timeout 60 $bin profile --model resnet18-cifar --backend cpu --batch 32 --out $r/profile-$i-$b-b32 \
        > $r/profile-$i-$b-b32.log 2>&1
    echo "profile $i $b exit $?"
    grep -E '^resnet18-cifar,cpu,32,op,conv2d' $r/profile-$i-$b-b32/profile-resnet18-cifar-cpu-ops.csv | cut -d, -f5,7
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
