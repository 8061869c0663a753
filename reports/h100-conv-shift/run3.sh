#!/bin/sh
# Third call, on the H100's host: the second call's step pairs spread more
# than the difference (PyTorch's own step moved 24% between its two runs),
# so the ResNet-18 CIFAR CPU step at batches 8 and 32 by old and new
# alternately, 6 times each, PyTorch's CPU step before and after. Results
# under $OUT/shift; the caller tars them.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu/lib OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=active
r=$OUT/shift
mkdir -p $r
.gpu/bin/test_conv --jobs 4 > $r/test_conv.log 2>&1
echo "test_conv exit $?: $(grep Synthesis $r/test_conv.log)"
timeout 90 python3 bench/torch_peer.py --device cpu --out $r/torch-before --batches-cifar 8,32 \
    --batches-imagenet 8 > $r/torch-before.log 2>&1
echo "torch before exit $?: $(grep -v '^#' $r/torch-before/resnet.csv | grep cifar | cut -d, -f9,16 | tr '\n' ' ')"
i=0
for b in old new old new old new old new old new old new; do
    i=$((i+1))
    bin=.gpu/bin/bench; [ $b = old ] && bin=.gpu/bin/bench-old
    timeout 60 $bin --sweep resnet --backends cpu --impl 'cpu*' --case 'resnet18-cifar' --sizes resnet=8,32 \
        --cpu-cap 20 --reps 5 --out $r/resnet-$i-$b > $r/resnet-$i-$b.log 2>&1
    echo "resnet $i $b exit $?: $(grep -v '^#' $r/resnet-$i-$b/resnet.csv | cut -d, -f9,16,17 | tail -n +2 | tr '\n' ' ')"
done
timeout 90 python3 bench/torch_peer.py --device cpu --out $r/torch-after --batches-cifar 8,32 \
    --batches-imagenet 8 > $r/torch-after.log 2>&1
echo "torch after exit $?: $(grep -v '^#' $r/torch-after/resnet.csv | grep cifar | cut -d, -f9,16 | tr '\n' ' ')"
