#!/bin/sh
# Second run, on the H100's host. `side.sh conv`: test_conv, the ceiling, and
# the conv sweep's CPU rows, cpu-im2col (the passes, now side by side) and
# cpu-im2col-batch, by this bench. `side.sh resnet`: the ResNet-18 CIFAR CPU
# step by the bench of 806d664 (old) and this one (new) alternately, old new
# new old, batches 8 and 32, PyTorch's CPU step after each pair
# (bench/torch_peer.py), then bench profile of the step at batches 8 and 32.
# Results under $OUT/side; the caller tars them.
set -u
export LD_LIBRARY_PATH=$PWD/.gpu/lib OPENBLAS_CORETYPE=SkylakeX
r=$OUT/side
mkdir -p $r
case $1 in
conv)
    .gpu/bin/test_conv --jobs 4 > $r/test_conv.log 2>&1
    echo "test_conv exit $?: $(grep Synthesis $r/test_conv.log)"
    OMP_WAIT_POLICY=active timeout 380 .gpu/bin/bench --sweep ceiling,conv --backends cpu --impl 'cpu-im2col*' \
        --case 'r18c-*,r18i-l3*,r18i-l4*' --sizes conv=8,32 --cpu-cap 3 --out $r/conv > $r/conv.log 2>&1
    echo "conv exit $?: $(grep -vc '^#' $r/conv/conv.csv) lines"
    ;;
resnet)
    i=0
    for b in old new new old; do
        i=$((i+1))
        bin=.gpu/bin/bench; [ $b = old ] && bin=.gpu/bin/bench-old806
        OMP_WAIT_POLICY=active timeout 80 $bin --sweep resnet --backends cpu --impl 'cpu*' --case 'resnet18-cifar' \
            --sizes resnet=8,32 --cpu-cap 20 --out $r/resnet-$i-$b > $r/resnet-$i-$b.log 2>&1
        echo "resnet $i $b exit $?: $(grep -v '^#' $r/resnet-$i-$b/resnet.csv | cut -d, -f3,9,16,27 | tail -n +2 | tr '\n' ' ')"
        if [ $i = 2 ] || [ $i = 4 ]; then
            timeout 100 python3 bench/torch_peer.py --device cpu --out $r/resnet-$i-$b --batches-cifar 8,32 \
                --batches-imagenet 8 > $r/torch-$i.log 2>&1
            echo "torch after $i exit $?: $(grep -v '^#' $r/resnet-$i-$b/resnet.csv | grep torch | cut -d, -f2,9,16,27 | tr '\n' ' ')"
        fi
    done
    for b in 8 32; do
        OMP_WAIT_POLICY=active timeout 90 .gpu/bin/bench profile --model resnet18-cifar --backend cpu --batch $b \
            --out $r/profile-b$b > $r/profile-b$b.log 2>&1
        echo "profile b$b exit $?: $(grep '^step:' $r/profile-b$b.log)"
    done
    ;;
*) echo "usage: side.sh conv|resnet" >&2; exit 2 ;;
esac
