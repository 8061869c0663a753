#!/bin/sh
# Second call, on the H100's host: the batch strategy cut into units when
# images are fewer than threads (381830b, new) against 829c25d (old).
# test_conv; the conv sweep's cpu-im2col-batch rows of the CIFAR layers at
# batches 8 and 32 by old, new, new, old, and PyTorch's CPU convolution of
# the same rows after them (bench/torch_conv_peer.py); the ResNet-18 CIFAR
# CPU step by old and new alternately, old new new old old new, batches 8
# and 32, PyTorch's CPU step after each pair (bench/torch_peer.py); bench
# profile of the step at batch 8 by the new one. Results under $OUT/cut;
# the caller tars them.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu/lib OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=active
r=$OUT/cut
mkdir -p $r
.gpu/bin/test_conv --jobs 4 > $r/test_conv.log 2>&1
echo "test_conv exit $?: $(grep Synthesis $r/test_conv.log)"
i=0
for b in old new new old; do
    i=$((i+1))
    bin=.gpu/bin/bench; [ $b = old ] && bin=.gpu/bin/bench-old
    timeout 100 $bin --sweep conv --backends cpu --impl 'cpu-im2col-batch' --case 'r18c-*' --sizes conv=8,32 \
        --cpu-cap 3 --out $r/conv-$i-$b > $r/conv-$i-$b.log 2>&1
    echo "conv $i $b exit $?: $(grep -vc '^#' $r/conv-$i-$b/conv.csv) lines"
done
timeout 150 python3 bench/torch_conv_peer.py --out $r/conv-4-old --devices cpu --filter r18c --batches 8,32 \
    --time-limit 130 > $r/torch-conv.log 2>&1
echo "torch conv exit $?: $(tail -2 $r/torch-conv.log | head -1)"
i=0
for b in old new new old old new; do
    i=$((i+1))
    bin=.gpu/bin/bench; [ $b = old ] && bin=.gpu/bin/bench-old
    timeout 80 $bin --sweep resnet --backends cpu --impl 'cpu*' --case 'resnet18-cifar' --sizes resnet=8,32 \
        --cpu-cap 20 --reps 10 --out $r/resnet-$i-$b > $r/resnet-$i-$b.log 2>&1
    echo "resnet $i $b exit $?: $(grep -v '^#' $r/resnet-$i-$b/resnet.csv | cut -d, -f3,16,27 | tail -n +2 | tr '\n' ' ')"
    if [ $((i % 2)) = 0 ]; then
        timeout 100 python3 bench/torch_peer.py --device cpu --out $r/resnet-$i-$b --batches-cifar 8,32 \
            --batches-imagenet 8 > $r/torch-$i.log 2>&1
        echo "torch after $i exit $?: $(grep -v '^#' $r/resnet-$i-$b/resnet.csv | grep torch | cut -d, -f2,9,16,27 | tr '\n' ' ')"
    fi
done
timeout 90 .gpu/bin/bench profile --model resnet18-cifar --backend cpu --batch 8 --out $r/profile-b8 \
    > $r/profile-b8.log 2>&1
echo "profile b8 exit $?: $(grep '^step:' $r/profile-b8.log)"
