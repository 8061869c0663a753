#!/bin/sh
# Third call, on the H100's host: more samples of the second, whose rows
# spread widely. bench profile of the ResNet-18 CIFAR CPU step at batch
# 32 by new, old, new, old; the step at batch 32 by new, old, old, new,
# new, old, PyTorch's CPU step after each pair. Results under $OUT/span.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu/lib OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=active
r=$OUT/span
mkdir -p $r
i=0
for b in new old new old; do
    i=$((i+1))
    bin=.gpu/bin/bench; [ $b = old ] && bin=.gpu/bin/bench-old
    timeout 60 $bin profile --model resnet18-cifar --backend cpu --batch 32 --out $r/profile-$i-$b-b32 \
        > $r/profile-$i-$b-b32.log 2>&1
    echo "profile $i $b exit $?: $(grep -E '^resnet18-cifar,cpu,32,op,(conv2d|batch_norm)' \
        $r/profile-$i-$b-b32/profile-resnet18-cifar-cpu-ops.csv | cut -d, -f5,7 | tr '\n' ' ')"
done
i=0
for b in new old old new new old; do
    i=$((i+1))
    bin=.gpu/bin/bench; [ $b = old ] && bin=.gpu/bin/bench-old
    timeout 60 $bin --sweep resnet --backends cpu --impl 'cpu*' --case 'resnet18-cifar' --sizes resnet=32 \
        --cpu-cap 20 --reps 10 --out $r/resnet-$i-$b > $r/resnet-$i-$b.log 2>&1
    echo "resnet $i $b exit $?: $(grep -v '^#' $r/resnet-$i-$b/resnet.csv | cut -d, -f3,9,16,27 | tail -n +2 | tr '\n' ' ')"
    if [ $((i % 2)) = 0 ]; then
        timeout 60 python3 bench/torch_peer.py --device cpu --out $r/resnet-$i-$b --batches-cifar 32 \
            --batches-imagenet 8 > $r/torch-$i.log 2>&1
        echo "torch after $i exit $?: $(grep -v '^#' $r/resnet-$i-$b/resnet.csv | grep torch | cut -d, -f2,9,16,27 | tr '\n' ' ')"
    fi
done
