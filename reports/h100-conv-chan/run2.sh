#!/bin/sh
# Second call, on the H100's host: DEFAULT now splits the weight's gradient
# by channels with 16 input channels a thread (new) against 51de557's
# DEFAULT (old, .gpu/bin/bench-old: the passes there). test_conv; the
# weight-gradient rows at batch 32 of the 256-channel layers that the rule
# also takes and run1 did not measure (the stride-2 3x3 and 1x1
# downsampling of stage 4), passes and chan alternately, 3 each; bench
# profile of the ResNet-18 CIFAR CPU step at batch 32 by old, new, old,
# new; the step by old and new alternately, 4 each; PyTorch's CPU step
# after. Results under $OUT/chan; the caller tars them.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu/lib OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=active
r=$OUT/chan
mkdir -p $r
.gpu/bin/test_conv --jobs 4 > $r/test_conv.log 2>&1
echo "test_conv exit $?: $(grep Synthesis $r/test_conv.log)"
cases='r18c-l4.0-conv1:bwd-weight,r18c-l4.0-down:bwd-weight,r18i-l4.0-conv1:bwd-weight,r18i-l4.0-down:bwd-weight'
i=0
for impl in cpu-im2col cpu-im2col-chan cpu-im2col-chan cpu-im2col cpu-im2col cpu-im2col-chan; do
    i=$((i+1))
    timeout 40 .gpu/bin/bench --sweep conv --backends cpu --impl $impl --case "$cases" --sizes conv=32 \
        --cpu-cap 3 --out $r/conv-$i-$impl > $r/conv-$i-$impl.log 2>&1
    echo "conv $i $impl exit $?: $(grep -v '^#' $r/conv-$i-$impl/conv.csv | awk -F, 'NR > 1 {printf "%s %s %.0f | ", $2, $27, $20}')"
done
i=0
for b in old new old new; do
    i=$((i+1))
    bin=.gpu/bin/bench; [ $b = old ] && bin=.gpu/bin/bench-old
    timeout 60 $bin profile --model resnet18-cifar --backend cpu --batch 32 --out $r/profile-$i-$b-b32 \
        > $r/profile-$i-$b-b32.log 2>&1
    echo "profile $i $b exit $?"
done
i=0
for b in old new new old old new new old; do
    i=$((i+1))
    bin=.gpu/bin/bench; [ $b = old ] && bin=.gpu/bin/bench-old
    timeout 50 $bin --sweep resnet --backends cpu --impl 'cpu*' --case 'resnet18-cifar' --sizes resnet=32 \
        --cpu-cap 20 --reps 5 --out $r/resnet-$i-$b > $r/resnet-$i-$b.log 2>&1
    echo "resnet $i $b exit $?: $(grep -v '^#' $r/resnet-$i-$b/resnet.csv | cut -d, -f9,16,17 | tail -n +2 | tr '\n' ' ')"
done
timeout 80 python3 bench/torch_peer.py --device cpu --out $r/torch-after --batches-cifar 32 \
    --batches-imagenet 8 > $r/torch-after.log 2>&1
echo "torch after exit $?: $(grep -v '^#' $r/torch-after/resnet.csv | grep cifar | cut -d, -f9,16 | tr '\n' ' ')"
